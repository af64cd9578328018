// Package outbox is the only way a Concord service emits an event: Append
// writes the event into the outbox table inside the caller's business
// transaction, so the event exists if and only if the business change
// committed. The relay (package publisher, binary relay) later publishes the
// rows to Kafka, at least once and in append order per partition key.
//
// The package also holds the operator's view of the table: Parked lists rows
// the relay gave up on, Retry and Skip release them.
package outbox
