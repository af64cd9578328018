// Package sagatest holds the saga's end-to-end tests: the three services
// run as real processes (so a test can kill -9 one) against the shared
// Kafka and PostgreSQL, each test with its own databases and topic prefix,
// and provider-sim runs in the test process so a test can turn its fault
// knobs.
package sagatest
