package console

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
)

// TimelineEvent is one event of an order: where it was appended, when it
// was published, where it landed in Kafka and who applied it.
type TimelineEvent struct {
	EventID     string
	Type        string
	Service     string // whose outbox
	OutboxID    int64
	Topic       string
	Key         string
	CausationID string
	Appended    time.Time
	Published   *time.Time
	Attempts    int
	LastError   string
	Parked      bool
	Skipped     bool
	// Partition and Offset are where the record landed, as the consumers
	// recorded it; nil until one applied it.
	Partition *int32
	Offset    *int64
	Applied   []Application
	DeadLetts []string // "group: reason" for each dead letter of this event
	Caused    []string // state transitions the event caused
}

// Application is one consumer group's processed_events row for an event.
type Application struct {
	Service string
	Group   string
	At      time.Time
	// AfterPublish is the time from the relay's publish to the commit of
	// the effect (nil when the publish time is unknown).
	AfterPublish *time.Duration
}

// TimelineHop is one row of the hop list: anything that happened to the
// order, in time order, with the time since the previous hop.
type TimelineHop struct {
	At    time.Time
	Lane  string
	What  string
	Since string
}

// TimelineData is the timeline page.
type TimelineData struct {
	Query    string
	Searched SearchKind
	OrderID  string
	Order    *OrderSummary
	Payment  *PaymentSummary
	Events   []TimelineEvent
	Hops     []TimelineHop
	Chart    template.HTML
	Findings []FindingSummary
	Webhooks []Webhook
	Recent   []string // recent order ids, offered when nothing was searched
}

// OrderSummary is the order row.
type OrderSummary struct {
	Status, Reason, Customer string
	Total                    int64
	Currency                 string
	Created                  time.Time
	Terminal                 *time.Time
}

// PaymentSummary is payment-svc's row for the order.
type PaymentSummary struct {
	ID                int64
	Status            string
	ProviderID        string
	ProviderStatus    string
	Attempts          int
	LastError         string
	LastSource        string
	LastReconciledAt  *time.Time
	RefundID          string
	ReservationStatus string
	Created           time.Time
}

// FindingSummary is a reconciliation finding of the order's payment.
type FindingSummary struct {
	ID         int64
	Kind       string
	Verdict    string
	Detected   time.Time
	Resolution string
	Resolved   *time.Time
}

// Webhook is a provider event payment-svc received for the payment.
type Webhook struct {
	ID         string
	Type       string
	Received   time.Time
	Deliveries int
	Applied    string
}

func (s *Server) timeline(r *http.Request) (any, error) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	q := r.URL.Query().Get("q")
	d := TimelineData{Query: q}
	if q == "" {
		rows, err := s.cfg.Orders.Pool.Query(ctx, `select id::text from orders order by created_at desc limit 10`)
		if err != nil {
			return d, fmt.Errorf("recent orders: %w", err)
		}
		d.Recent, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return d, err
	}
	search, err := ParseSearch(q)
	if err != nil {
		return d, badRequest("%s", err.Error())
	}
	d.Searched = search.Kind
	d.OrderID, err = s.resolveOrder(ctx, search)
	if err != nil {
		return d, err
	}
	if err := s.loadTimeline(ctx, &d); err != nil {
		return d, err
	}
	return d, nil
}

// resolveOrder finds the order a search names.
func (s *Server) resolveOrder(ctx context.Context, q Search) (string, error) {
	var order string
	switch q.Kind {
	case SearchUUID:
		var isOrder bool
		if err := s.cfg.Orders.Pool.QueryRow(ctx, `select exists(select 1 from orders where id = $1::uuid)`, q.Value).Scan(&isOrder); err != nil {
			return "", fmt.Errorf("look up order %s: %w", q.Value, err)
		}
		if isOrder {
			return q.Value, nil
		}
		for _, sv := range s.services() {
			err := sv.Pool.QueryRow(ctx, `select coalesce(payload->'data'->>'order_id', payload->>'correlation_id', aggregate_id)
				from outbox where event_id = $1::uuid`, q.Value).Scan(&order)
			if err == nil {
				return order, nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return "", fmt.Errorf("look up event %s in %s: %w", q.Value, sv.Name, err)
			}
		}
		return "", notFound("no order and no event has the id %s", q.Value)
	case SearchPaymentID:
		err := s.cfg.Payments.Pool.QueryRow(ctx, `select order_id from payments where id = $1`, q.ID).Scan(&order)
		if errors.Is(err, pgx.ErrNoRows) {
			return "", notFound("no payment has the id %d", q.ID)
		}
		return order, err
	case SearchProviderPayment:
		err := s.cfg.Payments.Pool.QueryRow(ctx, `select order_id from payments where provider_payment_id = $1`, q.Value).Scan(&order)
		if errors.Is(err, pgx.ErrNoRows) {
			return "", notFound("no payment has the provider id %s", q.Value)
		}
		return order, err
	case SearchProviderEvent:
		err := s.cfg.Payments.Pool.QueryRow(ctx, `select p.order_id from provider_events e
			join payments p on p.provider_payment_id = e.provider_payment_id where e.id = $1`, q.Value).Scan(&order)
		if errors.Is(err, pgx.ErrNoRows) {
			return "", notFound("no webhook of a known payment has the id %s", q.Value)
		}
		return order, err
	}
	return "", badRequest("search: unknown kind %q", q.Kind)
}

func (s *Server) loadTimeline(ctx context.Context, d *TimelineData) error {
	svcs := s.services()
	events := make([][]TimelineEvent, len(svcs))
	g, gctx := errgroup.WithContext(ctx)
	for i, sv := range svcs {
		g.Go(func() error {
			rows, err := sv.Pool.Query(gctx, `select id, event_id::text, event_type, topic, partition_key, created_at, published_at,
					attempts, coalesce(last_error, ''), parked_at is not null, skipped_at is not null,
					coalesce(payload->>'causation_id', '')
				from outbox
				where aggregate_id = $1 or partition_key = $1 or payload->>'correlation_id' = $1
				   or payload->'data'->>'order_id' = $1`, d.OrderID)
			if err != nil {
				return fmt.Errorf("%s: events of order %s: %w", sv.Name, d.OrderID, err)
			}
			events[i], err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (TimelineEvent, error) {
				e := TimelineEvent{Service: sv.Name}
				err := r.Scan(&e.OutboxID, &e.EventID, &e.Type, &e.Topic, &e.Key, &e.Appended, &e.Published,
					&e.Attempts, &e.LastError, &e.Parked, &e.Skipped, &e.CausationID)
				return e, err
			})
			return err
		})
	}
	var order OrderSummary
	var orderFound bool
	g.Go(func() error {
		err := s.cfg.Orders.Pool.QueryRow(gctx, `select status, coalesce(reason, ''), customer_id, total_amount, currency, created_at, terminal_at
			from orders where id = $1::uuid`, d.OrderID).Scan(&order.Status, &order.Reason, &order.Customer, &order.Total, &order.Currency,
			&order.Created, &order.Terminal)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		orderFound = err == nil
		return err
	})
	if err := g.Wait(); err != nil {
		return err
	}
	if orderFound {
		d.Order = &order
	}
	var all []TimelineEvent
	for _, es := range events {
		all = append(all, es...)
	}
	if len(all) == 0 && d.Order == nil {
		return notFound("order %s: no order row and no event", d.OrderID)
	}
	ids := make([]string, len(all))
	causal := make([]CausalEvent, len(all))
	byID := make(map[string]int, len(all))
	for i, e := range all {
		ids[i] = e.EventID
		causal[i] = CausalEvent{ID: e.EventID, Causes: e.CausationID, Appended: e.Appended}
		byID[e.EventID] = i
	}
	var hops []TimelineHop
	add := func(at time.Time, lane, what string) {
		hops = append(hops, TimelineHop{At: at, Lane: lane, What: what})
	}
	if d.Order != nil {
		add(d.Order.Created, s.cfg.Orders.Name, "order placed")
	}

	// Who applied each event, and what went to a dead-letter topic.
	g, gctx = errgroup.WithContext(ctx)
	type applied struct {
		svc, group, eventID, topic string
		partition                  int32
		offset                     int64
		at                         time.Time
	}
	apps := make([][]applied, len(svcs))
	dls := make([][][2]string, len(svcs))
	for i, sv := range svcs {
		g.Go(func() error {
			// The dedupe ledger's key is (group, event): name the groups
			// first so the lookup uses it instead of reading the table.
			rows, err := sv.Pool.Query(gctx, `with recursive g(name) as (
					(select consumer_group from processed_events order by consumer_group limit 1)
					union all
					select (select p.consumer_group from processed_events p where p.consumer_group > g.name
					        order by p.consumer_group limit 1) from g where g.name is not null)
				select p.consumer_group, p.event_id::text, p.topic, p.partition, p."offset", p.processed_at
				from processed_events p
				where p.consumer_group in (select name from g where name is not null) and p.event_id = any($1::uuid[])`, ids)
			if err != nil {
				return fmt.Errorf("%s: processed events of order %s: %w", sv.Name, d.OrderID, err)
			}
			var a applied
			a.svc = sv.Name
			_, err = pgx.ForEachRow(rows, []any{&a.group, &a.eventID, &a.topic, &a.partition, &a.offset, &a.at}, func() error {
				apps[i] = append(apps[i], a)
				return nil
			})
			if err != nil {
				return fmt.Errorf("%s: processed events of order %s: %w", sv.Name, d.OrderID, err)
			}
			rows, err = sv.Pool.Query(gctx, `select coalesce(event_id, ''), consumer_group || ': ' || reason
				from dead_letters where event_id = any($1)`, ids)
			if err != nil {
				return fmt.Errorf("%s: dead letters of order %s: %w", sv.Name, d.OrderID, err)
			}
			var id, what string
			_, err = pgx.ForEachRow(rows, []any{&id, &what}, func() error {
				dls[i] = append(dls[i], [2]string{id, what})
				return nil
			})
			return err
		})
	}
	type transition struct {
		lane, eventID, what string
		at                  time.Time
	}
	var orderTr, payTr []transition
	var pay PaymentSummary
	var payFound bool
	g.Go(func() error {
		rows, err := s.cfg.Orders.Pool.Query(gctx, `select coalesce(event_id, ''), 'order → ' || status || coalesce(' (' || reason || ')', ''), at
			from order_history where order_id = $1::uuid order by id`, d.OrderID)
		if err != nil {
			return fmt.Errorf("order history of %s: %w", d.OrderID, err)
		}
		var t transition
		t.lane = s.cfg.Orders.Name
		_, err = pgx.ForEachRow(rows, []any{&t.eventID, &t.what, &t.at}, func() error {
			orderTr = append(orderTr, t)
			return nil
		})
		return err
	})
	g.Go(func() error {
		err := s.cfg.Inventory.Pool.QueryRow(gctx, `select status from reservations where order_id = $1::uuid`, d.OrderID).Scan(&pay.ReservationStatus)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	g.Go(func() error {
		err := s.cfg.Payments.Pool.QueryRow(gctx, `select id, status, coalesce(provider_payment_id, ''), coalesce(observed_external_status, ''),
				attempts, coalesce(last_error, ''), coalesce(last_source, ''), last_reconciled_at, coalesce(refund_id, ''), created_at
			from payments where order_id = $1`, d.OrderID).Scan(&pay.ID, &pay.Status, &pay.ProviderID, &pay.ProviderStatus,
			&pay.Attempts, &pay.LastError, &pay.LastSource, &pay.LastReconciledAt, &pay.RefundID, &pay.Created)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("payment of order %s: %w", d.OrderID, err)
		}
		payFound = true
		rows, err := s.cfg.Payments.Pool.Query(gctx, `select coalesce(event_id::text, ''),
				'payment ' || from_status || ' → ' || to_status || ' (' || source || coalesce(', provider: ' || observed, '') || ')', at
			from payment_transitions where payment_id = $1 order by id`, pay.ID)
		if err != nil {
			return fmt.Errorf("payment transitions of %d: %w", pay.ID, err)
		}
		var t transition
		t.lane = s.cfg.Payments.Name
		if _, err := pgx.ForEachRow(rows, []any{&t.eventID, &t.what, &t.at}, func() error {
			payTr = append(payTr, t)
			return nil
		}); err != nil {
			return fmt.Errorf("payment transitions of %d: %w", pay.ID, err)
		}
		if pay.ProviderID != "" {
			rows, err = s.cfg.Payments.Pool.Query(gctx, `select id, type, received_at, deliveries, coalesce(applied, '')
				from provider_events where provider_payment_id = $1 order by received_at`, pay.ProviderID)
			if err != nil {
				return fmt.Errorf("webhooks of %s: %w", pay.ProviderID, err)
			}
			var w Webhook
			if _, err := pgx.ForEachRow(rows, []any{&w.ID, &w.Type, &w.Received, &w.Deliveries, &w.Applied}, func() error {
				d.Webhooks = append(d.Webhooks, w)
				return nil
			}); err != nil {
				return fmt.Errorf("webhooks of %s: %w", pay.ProviderID, err)
			}
		}
		rows, err = s.cfg.Payments.Pool.Query(gctx, `select id, kind, verdict, detected_at, coalesce(resolution, ''), resolved_at
			from reconciliation_findings where payment_id = $1 order by id`, pay.ID)
		if err != nil {
			return fmt.Errorf("findings of payment %d: %w", pay.ID, err)
		}
		var f FindingSummary
		_, err = pgx.ForEachRow(rows, []any{&f.ID, &f.Kind, &f.Verdict, &f.Detected, &f.Resolution, &f.Resolved}, func() error {
			d.Findings = append(d.Findings, f)
			return nil
		})
		return err
	})
	if err := g.Wait(); err != nil {
		return err
	}
	if payFound {
		d.Payment = &pay
		// The intent row is written before the provider is called, under
		// the idempotency key derived from the order.
		add(pay.Created, s.cfg.Payments.Name, fmt.Sprintf("payment %d written before calling the provider (%d call(s) so far)", pay.ID, pay.Attempts))
	} else if pay.ReservationStatus != "" {
		d.Payment = &PaymentSummary{ReservationStatus: pay.ReservationStatus}
	}
	for i := range svcs {
		for _, a := range apps[i] {
			j, ok := byID[a.eventID]
			if !ok {
				continue
			}
			e := &all[j]
			p, o := a.partition, a.offset
			e.Partition, e.Offset = &p, &o
			app := Application{Service: a.svc, Group: a.group, At: a.at}
			if e.Published != nil {
				dd := a.at.Sub(*e.Published)
				app.AfterPublish = &dd
			}
			e.Applied = append(e.Applied, app)
		}
		for _, dl := range dls[i] {
			if j, ok := byID[dl[0]]; ok {
				all[j].DeadLetts = append(all[j].DeadLetts, dl[1])
			}
		}
	}
	for _, t := range append(orderTr, payTr...) {
		if j, ok := byID[t.eventID]; ok && t.eventID != "" {
			all[j].Caused = append(all[j].Caused, t.what)
		}
		add(t.at, t.lane, t.what)
	}
	for _, w := range d.Webhooks {
		add(w.Received, "provider", fmt.Sprintf("webhook %s %s (%d deliveries)", w.Type, w.ID, w.Deliveries))
	}
	for _, f := range d.Findings {
		add(f.Detected, "reconciler", fmt.Sprintf("finding %d: %s / %s", f.ID, f.Verdict, f.Kind))
		if f.Resolved != nil {
			add(*f.Resolved, "reconciler", fmt.Sprintf("finding %d resolved: %s", f.ID, f.Resolution))
		}
	}
	for _, i := range CausalOrder(causal) {
		e := all[i]
		sort.Slice(e.Applied, func(a, b int) bool { return e.Applied[a].At.Before(e.Applied[b].At) })
		d.Events = append(d.Events, e)
		add(e.Appended, e.Service, e.Type+" appended")
		if e.Published != nil {
			add(*e.Published, "kafka", e.Type+" published to "+e.Topic)
		}
		for _, a := range e.Applied {
			add(a.At, a.Service, e.Type+" applied by "+a.Group)
		}
	}
	sort.SliceStable(hops, func(i, j int) bool { return hops[i].At.Before(hops[j].At) })
	chartHops := make([]Hop, len(hops))
	for i := range hops {
		if i > 0 {
			hops[i].Since = "+" + FormatDuration(hops[i].At.Sub(hops[i-1].At))
		}
		chartHops[i] = Hop{At: hops[i].At, Label: hops[i].What, Lane: hops[i].Lane}
	}
	d.Hops = hops
	d.Chart = TimelineChart(chartHops)
	return nil
}
