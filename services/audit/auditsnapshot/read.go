// Package auditsnapshot reads an audit.Snapshot: the rows the audit's
// checks need from order-svc's, inventory-svc's and payment-svc's databases
// (and the orchestrator's and shipping-svc's when they run), and every
// payment the provider holds for the orders.
package auditsnapshot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/services/audit"
	"github.com/concordhq/concord/services/payment/paymentprovider"
	"github.com/concordhq/concord/services/reconciler"
)

// Sources are where a snapshot is read from.
type Sources struct {
	Orders, Inventory, Payments *pgxpool.Pool
	// Orchestrator and Shipping are the orchestrated checkout's databases;
	// nil when it does not run (the snapshot then holds no sagas).
	Orchestrator, Shipping *pgxpool.Pool
	Provider               *paymentprovider.Client
}

// listAttempts is how often one page of the provider's listing is asked
// for when the provider answers 5xx or 429 (its fault knobs reach this read
// too); a listing is read-only, so asking again is safe.
const listAttempts = 10

// Read reads a snapshot. It reads every row, so it is meant for test and
// demo databases, not production ones.
func Read(ctx context.Context, src Sources) (audit.Snapshot, error) {
	var s audit.Snapshot
	var err error
	read := reads("audit snapshot", &err)
	read("orders", func() (e error) {
		s.Orders, e = rows(ctx, src.Orders, `select id::text, status, flow, created_at, terminal_at, items from orders order by created_at, id`,
			func(row pgx.CollectableRow) (audit.Order, error) {
				var o audit.Order
				var terminalAt *time.Time
				err := row.Scan(&o.ID, &o.Status, &o.Flow, &o.CreatedAt, &terminalAt, &o.Items)
				if terminalAt != nil {
					o.TerminalAt = *terminalAt
				}
				return o, err
			})
		return e
	})
	read("order history", func() (e error) {
		s.History, e = rows(ctx, src.Orders, `select event_id from order_history where event_id is not null`, pgx.RowTo[string])
		return e
	})
	read("reservations", func() (e error) {
		s.Reservations, e = rows(ctx, src.Inventory, `select order_id::text, status from reservations`, pgx.RowToStructByPos[audit.Reservation])
		return e
	})
	read("stock", func() (e error) {
		s.Stock, e = rows(ctx, src.Inventory, `select sku, available, reserved, committed from stock order by sku`, pgx.RowToStructByPos[audit.Stock])
		return e
	})
	read("payments", func() (e error) {
		s.Payments, e = rows(ctx, src.Payments, `select id, order_id, status from payments`, pgx.RowToStructByPos[audit.Payment])
		return e
	})
	read("payment transitions", func() (e error) {
		s.Transitions, e = rows(ctx, src.Payments, `select payment_id, to_status, source from payment_transitions`,
			pgx.RowToStructByPos[audit.Transition])
		return e
	})
	type outbox struct {
		service string
		pool    *pgxpool.Pool
	}
	outboxes := []outbox{{"order-svc", src.Orders}, {"inventory-svc", src.Inventory}, {"payment-svc", src.Payments}}
	for _, db := range []struct {
		service string
		pool    *pgxpool.Pool
	}{{"payment-svc", src.Payments}, {"inventory-svc", src.Inventory}} {
		read(db.service+" refused events", func() error {
			rs, e := rows(ctx, db.pool, `select $1::text, event_type, order_id, reason from refused_events order by id`,
				pgx.RowToStructByPos[audit.Refused], db.service)
			s.Refused = append(s.Refused, rs...)
			return e
		})
	}
	if src.Orchestrator != nil {
		read("sagas", func() (e error) {
			s.Sagas, e = rows(ctx, src.Orchestrator, `select e.saga_id, e.order_id, e.status, v.id is not null
				from saga_executions e left join saga_reviews v on v.saga_id = e.saga_id order by e.started_at, e.saga_id`,
				pgx.RowToStructByPos[audit.SagaRun])
			return e
		})
		read("authorization holds", func() (e error) {
			s.Holds, e = rows(ctx, src.Payments, `select order_id, status from payment_holds`, pgx.RowToStructByPos[audit.Hold])
			return e
		})
		outboxes = append(outboxes, outbox{"orchestrator", src.Orchestrator})
	}
	if src.Shipping != nil {
		read("shipments", func() (e error) {
			s.Shipments, e = rows(ctx, src.Shipping, `select order_id, status from shipments`, pgx.RowToStructByPos[audit.Shipment])
			return e
		})
		outboxes = append(outboxes, outbox{"shipping-svc", src.Shipping})
	}
	for _, db := range outboxes {
		read(db.service+" outbox", func() error {
			evs, e := rows(ctx, db.pool, `select $1::text, aggregate_id, event_type from outbox`, pgx.RowToStructByPos[audit.Event], db.service)
			s.Events = append(s.Events, evs...)
			return e
		})
	}
	read("reconciliation findings", func() (e error) {
		s.Findings, e = rows(ctx, src.Payments, `select id, payment_id, kind, verdict, resolved_at, coalesce(resolution, '')
			from reconciliation_findings order by id`, func(row pgx.CollectableRow) (reconciler.Finding, error) {
			var f reconciler.Finding
			return f, row.Scan(&f.ID, &f.PaymentID, &f.Kind, &f.Verdict, &f.ResolvedAt, &f.Resolution)
		})
		return e
	})
	read("provider payments", func() (e error) {
		since := time.Now()
		if len(s.Orders) > 0 {
			since = s.Orders[0].CreatedAt
		}
		s.Provider, e = providerPayments(ctx, src.Provider, since)
		return e
	})
	return s, err
}

// reads returns a function that runs one read after another until one
// fails, leaving in *err the first failure, named by what was read.
func reads(snapshot string, err *error) func(what string, f func() error) {
	return func(what string, f func() error) {
		if *err == nil {
			if e := f(); e != nil {
				*err = fmt.Errorf("%s: %s: %w", snapshot, what, e)
			}
		}
	}
}

func rows[T any](ctx context.Context, pool *pgxpool.Pool, sql string, to pgx.RowToFunc[T], args ...any) ([]T, error) {
	rs, err := pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rs, to)
}

// providerPayments lists every payment the provider created since (a
// minute either side, for clock skew) and maps the order in its metadata to
// them.
func providerPayments(ctx context.Context, gw *paymentprovider.Client, since time.Time) (map[string][]audit.ProviderPayment, error) {
	out := map[string][]audit.ProviderPayment{}
	cursor := ""
	for {
		var page paymentprovider.Page[paymentprovider.Payment]
		var err error
		for attempt := 1; ; attempt++ {
			page, err = gw.ListCreated(ctx, since.Add(-time.Minute), time.Now().Add(time.Minute), cursor, 100)
			if err == nil || !errors.Is(err, paymentprovider.ErrUnavailable) || attempt == listAttempts {
				break
			}
		}
		if err != nil {
			return nil, err
		}
		for _, p := range page.Items {
			id := p.Metadata["order_id"]
			out[id] = append(out[id], audit.ProviderPayment{ID: p.ProviderID, Status: p.Status})
		}
		if !page.HasMore {
			return out, nil
		}
		cursor = page.Next
	}
}
