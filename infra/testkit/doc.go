// Package testkit gives integration tests the real infrastructure:
//
//   - Kafka: CONCORD_KAFKA_BROKERS (or the older KAFKA_BROKERS) when set (make test sets it to the local broker);
//     else a testcontainers Kafka where a Docker engine answers; else franz-go's
//     in-process kfake, announced in the test log. With CI=true and no
//     CONCORD_KAFKA_BROKERS it fails instead of falling back: a fake is never CI's proof.
//   - PostgreSQL: a fresh database per test on CONCORD_POSTGRES_URL, dropped
//     when the test ends.
//   - Private instances (PrivateKafka, PrivatePostgres) on free ports for tests
//     that stop, kill or restart the broker or the database, so packages running
//     in parallel against the shared stack are never disturbed; and one
//     private PostgreSQL per test binary (PackagePostgresURL) for tests that
//     the shared server's other users must not delay, such as those creating
//     logical replication slots.
//   - Child processes (package proc): start a binary with its arguments and
//     environment, its output in a log, wait until it is ready, pause it
//     (SIGSTOP/SIGCONT), kill it (SIGKILL), stop it gracefully, restart it.
//     The private instances, the relay and saga tests, the crash test and
//     the demo all run their children through it.
package testkit
