// Package orchtest holds the orchestrated saga's end-to-end tests: the
// orchestrator runs as a real process (so a test can kill -9 it) against
// the shared Kafka and PostgreSQL, each test with its own database and
// topic prefix. The participants are small fakes in the test files that
// consume the command topics and reply through the contract, scripted per
// saga, and count every command they receive; they stand in for
// payment-svc, inventory-svc and shipping-svc so the orchestrator's own
// guarantees are tested apart from theirs.
package orchtest
