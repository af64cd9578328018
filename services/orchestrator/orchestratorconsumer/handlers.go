// Package orchestratorconsumer adapts the orchestrator's inputs (checkout
// requests from order-svc, replies from the participants) to the saga
// store, through the idempotent runner: each is applied once, in the
// transaction that stores the saga's new state and appends its commands.
package orchestratorconsumer

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/orchestrator/orchestratorstore"
)

// Topics the orchestrator consumes (before any prefix). Replies and
// requests are keyed by saga id, so one saga's inputs arrive in order on
// one partition and one consumer applies them one after another.
var Topics = []string{contract.TypeSagaCheckoutRequested.Topic(), contract.TypeSagaStepReplied.Topic()}

// Mux routes the orchestrator's inputs to store.
func Mux(store *orchestratorstore.Store) *idempotent.Mux {
	m := &idempotent.Mux{}
	idempotent.Handle(m, func(ctx context.Context, tx pgx.Tx, ev idempotent.Event, d contract.SagaCheckoutRequestedV1, out outbox.Emitter) error {
		return store.Start(ctx, tx, out, ev.EventID, d)
	})
	idempotent.Handle(m, func(ctx context.Context, tx pgx.Tx, ev idempotent.Event, d contract.SagaStepRepliedV1, out outbox.Emitter) error {
		return store.Reply(ctx, tx, out, ev.EventID, d)
	})
	return m
}

// BatchHandler applies a batch one event after another (each saga's row
// lock is taken in event order); a version no handler reads is counted as
// wrong_version and dead-lettered.
func BatchHandler(store *orchestratorstore.Store, m *idempotent.Mux) idempotent.BatchHandler {
	return func(ctx context.Context, tx pgx.Tx, evs []idempotent.Event, out outbox.Emitter) error {
		for _, ev := range evs {
			if err := m.Handle(ctx, tx, ev, out); err != nil {
				if errors.Is(err, contract.ErrMismatch) {
					store.Metrics.Rejected(orchestratorstore.RejectWrongVersion)
				}
				return err
			}
		}
		return nil
	}
}
