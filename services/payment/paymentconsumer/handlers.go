// Package paymentconsumer adapts the saga's events to the payment store. Handlers
// only write rows; the charger makes the provider calls once those rows
// are committed.
//
// The handlers check every saga event against what the service already
// knows before anything moves money (see payment.CheckReservation and
// payment.CheckCancellation): the service learns each order from
// order-svc's order.created (known_orders) and its confirmation from
// order.confirmed; a reservation is charged only for a known order with
// its amount, currency, customer and payment method; a cancellation of a
// confirmed order refunds nothing. An event that contradicts what is
// known is recorded in refused_events with its reason and counted
// (services/internal/contradiction), never applied and never fatal.
package paymentconsumer

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/internal/contradiction"
	"github.com/concordhq/concord/services/payment"
	"github.com/concordhq/concord/services/payment/paymentstore"
)

// Topics the payment service consumes (before any prefix).
var Topics = []string{contract.TypeInventoryReserved.Topic(), contract.TypeOrderCreated.Topic()}

// Types the saga's handlers act on (see Register).
var Types = []contract.Type{contract.TypeOrderCreated, contract.TypeOrderConfirmed, contract.TypeInventoryReserved,
	contract.TypeOrderCancelled}

// DefaultPaymentMethod is charged when an order names none.
const DefaultPaymentMethod = payment.DefaultPaymentMethod

// Service is the service label of the refusals this package records.
const Service = "payment-svc"

// DefaultUnknownOrderWait is how long a reservation waits for its
// order.created by default (payment-svc --unknown-order-wait).
const DefaultUnknownOrderWait = 2 * time.Minute

// Checks configures the handlers' state checks. A nil *Checks takes the
// defaults.
type Checks struct {
	// UnknownOrderWait is how long a reservation whose order.created was
	// not seen waits for it before it is refused as unknown_order. The
	// order's events travel on order-events and the reservation on
	// inventory-events, so a reservation may overtake its order; a wait
	// longer than the consumer's worst lag keeps the genuine ones. Zero
	// refuses a reservation for an unknown order at once.
	UnknownOrderWait time.Duration
}

func (c *Checks) wait() time.Duration {
	if c == nil {
		return DefaultUnknownOrderWait
	}
	return max(c.UnknownOrderWait, 0)
}

// Register adds the saga's handlers to mux, each applying one event as
// BatchHandler applies a batch of one: order.created makes the order
// known and settles reservations waiting for it; order.confirmed notes the
// confirmation; inventory.reserved stores the payment intent of a known,
// matching order (unless the order was cancelled), waits for an unknown
// one, and is refused otherwise; order.cancelled marks the order so a
// payment that is or becomes paid gets refunded, unless order-svc
// confirmed it.
func Register(mux *idempotent.Mux, checks *Checks) {
	one := func(ctx context.Context, tx pgx.Tx, ev idempotent.Event, out outbox.Emitter) error {
		se, _, err := decodeSaga(ev)
		if err != nil {
			return err
		}
		if err := paymentstore.LockOrders(ctx, tx, []string{se.orderID}); err != nil {
			return err
		}
		return applySaga(ctx, tx, []sagaEvent{se}, checks)
	}
	idempotent.Handle(mux, func(ctx context.Context, tx pgx.Tx, ev idempotent.Event, _ contract.OrderCreatedV3, out outbox.Emitter) error {
		return one(ctx, tx, ev, out)
	})
	idempotent.Handle(mux, func(ctx context.Context, tx pgx.Tx, ev idempotent.Event, _ contract.OrderConfirmedV1, out outbox.Emitter) error {
		return one(ctx, tx, ev, out)
	})
	idempotent.Handle(mux, func(ctx context.Context, tx pgx.Tx, ev idempotent.Event, _ contract.InventoryReservedV2, out outbox.Emitter) error {
		return one(ctx, tx, ev, out)
	})
	idempotent.Handle(mux, func(ctx context.Context, tx pgx.Tx, ev idempotent.Event, _ contract.OrderCancelledV1, out outbox.Emitter) error {
		return one(ctx, tx, ev, out)
	})
}

// sagaEvent is one decoded saga event; exactly one of its parts is set.
type sagaEvent struct {
	ev          idempotent.Event
	orderID     string
	created     *paymentstore.LearnedOrder
	confirmed   bool
	reservation *paymentstore.WaitingReservation
	cancelled   *contract.OrderCancelledV1
}

// decodeSaga reads a saga event; ok is false for other types. An event
// that cannot be read is a permanent failure of that event.
func decodeSaga(ev idempotent.Event) (se sagaEvent, ok bool, err error) {
	se.ev = ev
	switch ev.Type() {
	case contract.TypeOrderCreated:
		d, err := idempotent.Decode[contract.OrderCreatedV3](ev)
		if err != nil {
			return se, false, err
		}
		se.orderID = d.OrderID
		se.created = &paymentstore.LearnedOrder{OrderID: d.OrderID, EventID: ev.EventID, KnownOrder: payment.KnownOrder{
			Amount: d.TotalAmount, Currency: d.Currency, CustomerID: d.CustomerID, PaymentMethod: d.PaymentMethod}}
	case contract.TypeOrderConfirmed:
		d, err := idempotent.Decode[contract.OrderConfirmedV1](ev)
		if err != nil {
			return se, false, err
		}
		se.orderID, se.confirmed = d.OrderID, true
	case contract.TypeInventoryReserved:
		d, err := idempotent.Decode[contract.InventoryReservedV2](ev)
		if err != nil {
			return se, false, err
		}
		// A reservation without an amount and currency (one written before
		// inventory.reserved v2) cannot be charged.
		if d.Currency == "" || d.Amount == nil {
			return se, false, idempotent.Permanent(fmt.Errorf("event %s (order %s): reservation carries no amount and currency", ev.EventID, d.OrderID))
		}
		se.orderID = d.OrderID
		se.reservation = &paymentstore.WaitingReservation{EventID: ev.EventID, OrderID: d.OrderID, Data: ev.Data,
			Claim: payment.ReservationClaim{Amount: *d.Amount, Currency: d.Currency, CustomerID: d.CustomerID, PaymentMethod: d.PaymentMethod}}
	case contract.TypeOrderCancelled:
		d, err := idempotent.Decode[contract.OrderCancelledV1](ev)
		if err != nil {
			return se, false, err
		}
		se.orderID, se.cancelled = d.OrderID, &d
	default:
		return se, false, nil
	}
	return se, true, nil
}

// BatchHandler applies a consumer batch with mux (Register's handlers plus
// whatever else the service consumes), in offset order, except that the
// saga's events between two others are applied together (applySaga): what
// they store is written in a few statements per batch, not per event.
// The orders of the batch are locked first, in id order (see
// paymentstore.LockOrders).
func BatchHandler(mux *idempotent.Mux, checks *Checks) idempotent.BatchHandler {
	return func(ctx context.Context, tx pgx.Tx, evs []idempotent.Event, out outbox.Emitter) error {
		// Decode what the batch locks once, up front.
		saga := make([]*sagaEvent, len(evs)) // by event; nil: not a saga event
		var ids []string
		for i, ev := range evs {
			se, ok, err := decodeSaga(ev)
			if err != nil {
				return err
			}
			if ok {
				saga[i] = &se
				ids = append(ids, se.orderID)
			}
		}
		slices.Sort(ids)
		if err := paymentstore.LockOrders(ctx, tx, slices.Compact(ids)); err != nil {
			return err
		}
		var run []sagaEvent
		flush := func() error {
			err := applySaga(ctx, tx, run, checks)
			run = run[:0]
			return err
		}
		for i, ev := range evs {
			if se := saga[i]; se != nil {
				run = append(run, *se)
				continue
			}
			if err := flush(); err != nil {
				return err
			}
			if err := mux.Handle(idempotent.EventContext(ctx, ev), tx, ev, out); err != nil {
				return fmt.Errorf("event %s (%s): %w", ev.EventID, ev.EventType, err)
			}
		}
		return flush()
	}
}

// applySaga applies saga events in order, their orders locked by the
// caller. It reads what is known of the orders once, decides each event
// in Go against it (updated as it goes, so each event sees what the
// earlier ones left), and writes the outcome in a few set-based
// statements. Intents are written before each cancellation, so a
// cancellation sees the intent it must mark and an intent written after
// its order's cancellation is skipped (paymentstore.CreateIntents).
func applySaga(ctx context.Context, tx pgx.Tx, evs []sagaEvent, checks *Checks) error {
	if len(evs) == 0 {
		return nil
	}
	ids := make([]string, 0, len(evs))
	// Stored waiting reservations matter only to an order.created that
	// settles them: a batch of reservations (inventory-events) reads none,
	// which saves its transaction a statement.
	var created []string
	for _, se := range evs {
		ids = append(ids, se.orderID)
		if se.created != nil {
			created = append(created, se.orderID)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	known, err := paymentstore.KnownOrders(ctx, tx, ids)
	if err != nil {
		return err
	}
	waiting, err := paymentstore.WaitingFor(ctx, tx, created)
	if err != nil {
		return err
	}
	s := settlement{known: known, wait: checks.wait(), fresh: map[string]paymentstore.WaitingReservation{}}
	for _, se := range evs {
		// A charge this event decides continues the event's trace.
		s.traceparent = kit.Traceparent(idempotent.EventContext(ctx, se.ev))
		switch {
		case se.created != nil:
			if _, ok := s.known[se.orderID]; ok {
				continue // a repeated order.created: the order keeps what it was learned with
			}
			s.known[se.orderID] = se.created.KnownOrder
			s.learned = append(s.learned, *se.created)
			for _, w := range waiting[se.orderID] {
				s.settle(w, true)
			}
			delete(waiting, se.orderID)
		case se.reservation != nil:
			if s.settle(*se.reservation, false) == payment.Wait {
				waiting[se.orderID] = append(waiting[se.orderID], *se.reservation)
			}
		case se.confirmed:
			o, ok := s.known[se.orderID]
			if record, reason := payment.CheckConfirmation(ptr(o, ok)); !record {
				s.refuse(se.ev, se.orderID, reason, "order.confirmed for an order whose order.created payment-svc never saw")
				continue
			}
			o.Confirmed = true
			s.known[se.orderID] = o
			s.confirmed = append(s.confirmed, se.orderID)
		case se.cancelled != nil:
			o, ok := s.known[se.orderID]
			if refund, reason := payment.CheckCancellation(ptr(o, ok)); !refund {
				s.refuse(se.ev, se.orderID, reason, fmt.Sprintf("order.cancelled (%s) of an order order-svc confirmed: no refund", se.cancelled.Reason))
				continue
			}
			if err := s.flushIntents(ctx, tx); err != nil {
				return err
			}
			if _, err := paymentstore.RecordCancelledOrder(ctx, tx, se.orderID, se.cancelled.Reason); err != nil {
				return err
			}
		}
	}
	return s.write(ctx, tx)
}

// settlement is what applySaga (or the sweeper) decided and has still to
// write.
type settlement struct {
	known     map[string]payment.KnownOrder
	wait      time.Duration
	learned   []paymentstore.LearnedOrder
	confirmed []string
	intents   []paymentstore.NewIntent
	fresh     map[string]paymentstore.WaitingReservation // new waiting reservations, by event id
	done      []string                                   // stored waiting reservations charged or refused
	refusals  []contradiction.Refusal
	// traceparent is the trace of the event being decided, stored with
	// the charges it decides ("" with tracing off, and in a sweep).
	traceparent string
}

// settle decides reservation w against its order; stored says it is a
// waiting_reservations row (else it just arrived, or arrived earlier in
// this batch and is in fresh).
func (s *settlement) settle(w paymentstore.WaitingReservation, stored bool) payment.Verdict {
	o, ok := s.known[w.OrderID]
	v, reason := payment.CheckReservation(ptr(o, ok), w.Claim, w.Waited, s.wait)
	if v == payment.Wait {
		if !stored {
			s.fresh[w.EventID] = w
		}
		return v
	}
	if _, isFresh := s.fresh[w.EventID]; isFresh {
		delete(s.fresh, w.EventID)
	} else if stored {
		s.done = append(s.done, w.EventID)
	}
	switch v {
	case payment.Charge:
		s.intents = append(s.intents, paymentstore.NewIntent{OrderID: w.OrderID, Amount: o.Amount, Currency: o.Currency,
			CustomerID: o.CustomerID, PaymentMethod: methodOf(o.PaymentMethod), Traceparent: s.traceparent})
	case payment.Refuse:
		s.refusals = append(s.refusals, contradiction.Refusal{Service: Service, EventID: w.EventID, EventType: string(contract.TypeInventoryReserved),
			OrderID: w.OrderID, Reason: reason, Detail: reservationDetail(w, o, ok, reason), Data: w.Data})
	}
	return v
}

func (s *settlement) refuse(ev idempotent.Event, orderID, reason, detail string) {
	s.refusals = append(s.refusals, contradiction.Refusal{Service: Service, EventID: ev.EventID, EventType: ev.EventType,
		OrderID: orderID, Reason: reason, Detail: detail, Data: ev.Data})
}

func (s *settlement) flushIntents(ctx context.Context, tx pgx.Tx) error {
	_, err := paymentstore.CreateIntents(ctx, tx, s.intents)
	s.intents = s.intents[:0]
	return err
}

func (s *settlement) write(ctx context.Context, tx pgx.Tx) error {
	if err := paymentstore.LearnOrders(ctx, tx, s.learned); err != nil {
		return err
	}
	if err := paymentstore.ConfirmOrders(ctx, tx, s.confirmed); err != nil {
		return err
	}
	if err := s.flushIntents(ctx, tx); err != nil {
		return err
	}
	fresh := make([]paymentstore.WaitingReservation, 0, len(s.fresh))
	for _, w := range s.fresh {
		fresh = append(fresh, w)
	}
	if err := paymentstore.KeepWaiting(ctx, tx, fresh); err != nil {
		return err
	}
	if err := paymentstore.StopWaiting(ctx, tx, s.done); err != nil {
		return err
	}
	return contradiction.Record(ctx, tx, s.refusals...)
}

func reservationDetail(w paymentstore.WaitingReservation, o payment.KnownOrder, known bool, reason string) string {
	asks := fmt.Sprintf("inventory.reserved asks %d %s from %s (%s)", w.Claim.Amount, w.Claim.Currency, w.Claim.CustomerID, methodOf(w.Claim.PaymentMethod))
	if !known {
		return fmt.Sprintf("%s; no order.created for the order within %s", asks, w.Waited.Round(time.Second))
	}
	return fmt.Sprintf("%s; order.created says %d %s from %s (%s): %s", asks, o.Amount, o.Currency, o.CustomerID, methodOf(o.PaymentMethod), reason)
}

func methodOf(m string) string {
	if m == "" {
		return DefaultPaymentMethod
	}
	return m
}

func ptr(o payment.KnownOrder, ok bool) *payment.KnownOrder {
	if !ok {
		return nil
	}
	return &o
}
