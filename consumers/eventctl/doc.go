// Package eventctl is the event tool's command line: tail decodes the
// events of Concord's topics (JSON and Confluent-framed Avro envelopes,
// checked against the schema catalog) and prints them one per line or as
// JSON lines; produce validates events from a file against the catalog
// and appends them keyed by their type's partition key.
//
// The decisions — where reading starts, what a record decodes to, which
// records a filter keeps, what an event file produces — are pure
// functions (start.go, decode.go, produce.go); tail.go and cli.go do the
// Kafka and terminal I/O.
package eventctl
