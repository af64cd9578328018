package idempotent_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
)

// TestTransientHandlerErrorsAreRetriedAndAppliedOnce protects the other
// half of classification: a handler that hits a database error retrying
// can fix is retried until it succeeds, its event applied exactly once
// and never dead-lettered. A runner that treated every handler error as
// permanent would skip an event because the database was briefly unable
// to serve it.
//
// The handler of the middle of three events writes its effect and then
// fails, on its first attempts, with a real error from PostgreSQL:
//
//   - a serialization failure (SQLSTATE 40001), raised by the server;
//   - its own connection killed (pg_terminate_backend of its backend).
//
// It fails more than once because a permanent failure is tried a second
// time, on the careful path with one savepoint per record, before it is
// dead-lettered: an error that went away after one attempt would be
// applied either way. A killed connection cannot be dead-lettered even if
// it were taken for permanent (its savepoint and transaction are gone with
// it, so the batch is retried regardless); there the retry count is what
// shows that each failure was retried as transient, not redone on the
// careful path.
func TestTransientHandlerErrorsAreRetriedAndAppliedOnce(t *testing.T) {
	const failures = 3 // attempts of the middle event that fail
	for _, tc := range []struct {
		name string
		// fail runs, in the handler's transaction, what makes the attempt
		// fail, and returns the error the handler got.
		fail func(ctx context.Context, tx pgxTx) error
		// as checks that the error is the one the case means to cause.
		as func(tx pgxTx, err error) error
	}{
		{
			name: "serialization failure",
			fail: func(ctx context.Context, tx pgxTx) error {
				_, err := tx.Exec(ctx, `DO $$ BEGIN RAISE EXCEPTION 'could not serialize access' USING ERRCODE = '40001'; END $$`)
				return err
			},
			as: func(_ pgxTx, err error) error {
				if pg := (*pgconn.PgError)(nil); !errors.As(err, &pg) || pg.Code != "40001" {
					return fmt.Errorf("handler got %v; want SQLSTATE 40001", err)
				}
				return nil
			},
		},
		{
			name: "connection killed",
			fail: func(ctx context.Context, tx pgxTx) error {
				_, err := tx.Exec(ctx, `SELECT pg_terminate_backend(pg_backend_pid())`)
				return err
			},
			as: func(tx pgxTx, err error) error {
				if err == nil || !tx.Conn().IsClosed() {
					return fmt.Errorf("handler got %v with its connection open; want the connection lost", err)
				}
				return nil
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := testkit.NewKafka(t)
			pool := testkit.NewPool(t)
			migrate(t, pool)
			topic := k.CreateTopic(t, "orders", 1)
			group := testkit.UniqueName(t, "g")
			recs := batch(t, topic, "k", 0, 3)
			middle := headers(recs[1])[schemas.HeaderEventID]

			var mu sync.Mutex
			attempts := 0
			var got []error // what the failing attempts ran into
			handler := func(ctx context.Context, tx pgxTx, ev idempotent.Event, out outbox.Emitter) error {
				if err := insertEffect(ctx, tx, ev, out); err != nil || ev.EventID != middle {
					return err
				}
				mu.Lock()
				attempts++
				n := attempts
				mu.Unlock()
				if n > failures {
					return nil
				}
				err := tc.fail(ctx, tx)
				mu.Lock()
				got = append(got, tc.as(tx, err))
				mu.Unlock()
				return err
			}
			r := start(t, idempotent.Config{Group: group, Topics: []string{topic}, Pool: pool, Kafka: kafkaConfig(k),
				Handler: handler, CommitInterval: 100 * time.Millisecond})
			produce(t, k.Client(t), recs...)

			eventually(t, 60*time.Second, "offsets committed past the failing event", func() error {
				if o := committedOffset(t, k, group, topic, 0); o != 3 {
					return fmt.Errorf("committed %d", o)
				}
				return nil
			})
			mu.Lock()
			defer mu.Unlock()
			for i, err := range got {
				if err != nil {
					t.Errorf("failing attempt %d: %v", i+1, err)
				}
			}
			if len(got) != failures || attempts != failures+1 {
				t.Errorf("middle event: %d attempts, %d failed; want %d failed and one more that succeeded", attempts, len(got), failures)
			}
			if n := count(t, pool, `SELECT count(*) FROM dead_letters`); n != 0 {
				t.Errorf("%d dead letters; want none: the failure was transient", n)
			}
			if n := count(t, pool, `SELECT count(*) FROM effects WHERE event_id = $1`, middle); n != 1 {
				t.Errorf("middle event applied %d times; want once", n)
			}
			if n, d := count(t, pool, `SELECT count(*) FROM effects`), count(t, pool, `SELECT count(DISTINCT event_id) FROM effects`); n != 3 || d != 3 {
				t.Errorf("%d effects of %d events; want 3 of 3", n, d)
			}
			if s := r.Stats(); s.DeadLettered != 0 || s.Retries < failures {
				t.Errorf("stats %+v; want no dead letters and a retry after each of the %d failures", s, failures)
			}
		})
	}
}
