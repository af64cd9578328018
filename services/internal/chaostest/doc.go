// Package chaostest runs the whole checkout pipeline as separate processes
// under load, two instances of every service, and breaks it on a seeded
// schedule: SIGKILL and restart of every service instance, provider-sim
// and the reconciler (twice each), SIGSTOP/SIGCONT of some instances, and
// in the full form a restart of a private PostgreSQL server and, on a
// private 3-node KRaft cluster (replication factor 3, min.insync.replicas
// 2), the partition leader killed and another node stopped, each for a
// few seconds. When the load has passed it waits for the
// deployment to settle and checks what a user is promised:
//
//   - every accepted order is terminal, and the cross-service invariants of
//     both checkout flows hold (services/audit: nothing charged without its
//     order, nothing applied twice, stock conserved, sagas ended);
//   - at most 2% of the orders are cancelled by order-svc's stuck-order
//     timeout;
//   - the longest stall of any consumer group (lag above zero while its
//     committed offsets stand still) is printed.
//
// `make test` runs the short form (about a minute of load on the shared
// stack, service faults only); `make chaos` runs the full form
// (CONCORD_CHAOS=full: a longer load on a private cluster and database,
// which lose nodes and restart too). CONCORD_CHAOS_SEED picks the schedule and the
// order mix; the same seed gives the same faults at the same offsets into
// the run.
package chaostest
