// Package idempotent turns Kafka's at-least-once delivery into exactly one
// effect per event.
//
// A Runner consumes a set of topics as a consumer group (cooperative-sticky)
// and, for each polled batch of one partition, opens one PostgreSQL
// transaction in which it records every event in processed_events with
// INSERT … ON CONFLICT DO NOTHING and calls the handler only for events the
// insert reported as new. The transaction commits first; only then are the
// batch's offsets marked and committed. A crash between the two redelivers
// the batch, and the dedupe rows turn the redelivery into no-ops.
//
// Inserting first (rather than checking and then inserting) is what makes
// this safe under concurrent delivery: two transactions racing on the same
// event serialise on the primary key, and the loser sees the conflict.
//
// Records of one partition are applied strictly in order; partitions run in
// parallel, bounded by Config.MaxConcurrentPartitions. With
// Config.JoinPartitions the batches waiting for a slot are applied together,
// in the transaction of the next batch to get one. The records polled
// and not yet applied are bounded in bytes by Config.MaxBufferedBytes: the
// runner polls only what fits, however far behind it is.
//
// Failures are either permanent or transient (see Classify). A permanent one
// (bytes that are not an envelope, a payload its schema rejects, an unknown
// type or version, a handler error wrapped with Permanent) sends the record
// to the group's dead-letter topic "<group>.dlq", records it in dead_letters,
// and the partition goes on. A transient one (database down, broker
// hiccup) rolls the batch back and retries it with backoff; the partition's
// offsets do not move and nothing is skipped.
package idempotent
