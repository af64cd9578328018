// Package shipper is the shipping service's worker that talks to the
// carrier. It only calls the carrier for shipments whose row is committed,
// counts every create call in the row before sending it, and looks a key
// up at the carrier before any call that follows one whose answer was
// lost, so the carrier creates at most one shipment per key whatever
// times out or crashes. What the carrier says is recorded with the
// command's reply in one transaction (shippingstore.Update).
package shipper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/concordhq/concord/infra/backoff"
	"github.com/concordhq/concord/infra/wake"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/services/shipping"
	"github.com/concordhq/concord/services/shipping/shippingcarrier"
	"github.com/concordhq/concord/services/shipping/shippingstore"
)

// Carrier is the part of the carrier gateway the worker uses.
type Carrier interface {
	Create(ctx context.Context, key, reference string, p shipping.Parcel) (shippingcarrier.Shipment, error)
	Lookup(ctx context.Context, key string) (shippingcarrier.Shipment, bool, error)
	Cancel(ctx context.Context, id string) (shippingcarrier.Shipment, error)
}

// DefaultPollInterval is Config.PollInterval's default.
const DefaultPollInterval = time.Second

// Config configures a Shipper; zero values take the defaults named.
type Config struct {
	Pool *pgxpool.Pool
	// Outbox routes the replies (the service's topic prefix).
	Outbox  outbox.Writer
	Carrier Carrier
	Log     *slog.Logger
	// Concurrency bounds carrier calls in flight (default 16).
	Concurrency int
	// PollInterval is how often due shipments are looked for when nothing
	// wakes the worker (default 1s). A shipment is taken at once when it is
	// committed: the service calls Nudge after its consumer commits, an
	// attempt wakes the worker when it ends (its outcome may leave the row
	// due again), and a retry wakes it when due. The poll finds what no
	// wake-up announced (a lost nudge, an expired lease, another
	// instance's retry) this late at most.
	PollInterval time.Duration
	// Lease is how long a claimed shipment is left to one attempt; it must
	// exceed a carrier call's timeout, or a slow call and the next attempt
	// overlap (default 15s).
	Lease time.Duration
	// FirstRetry and MaxRetry bound the wait between attempts the carrier
	// did not answer (defaults 200ms and 5s; it doubles per attempt). A
	// step's budget ends the retries of a command.
	FirstRetry, MaxRetry time.Duration
	// Registerer receives the worker's metrics when set.
	Registerer prometheus.Registerer
	// Now tells the time (default time.Now).
	Now func() time.Time
}

// Shipper is the worker; Run it once.
type Shipper struct {
	cfg   Config
	calls *prometheus.CounterVec
	wake  *wake.Signal
}

// New checks cfg and returns a Shipper.
func New(cfg Config) (*Shipper, error) {
	if cfg.Pool == nil || cfg.Carrier == nil {
		return nil, errors.New("shipper: Pool and Carrier are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 16
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 15 * time.Second
	}
	if cfg.FirstRetry <= 0 {
		cfg.FirstRetry = 200 * time.Millisecond
	}
	if cfg.MaxRetry <= 0 {
		cfg.MaxRetry = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Shipper{cfg: cfg, wake: wake.New(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_shipping_carrier_calls_total",
			Help: "Carrier calls by kind (create, lookup, cancel) and outcome (ok, not_found, declined, shipped, refused, unavailable)."},
			[]string{"kind", "outcome"})}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(s.calls); err != nil {
			return nil, fmt.Errorf("shipper metrics: %w", err)
		}
	}
	return s, nil
}

// Nudge makes the worker look for due shipments now.
func (s *Shipper) Nudge() { s.wake.Now() }

// Run works until ctx is done, then lets the calls in flight finish and
// record their outcome (their own timeout bounds them) before returning:
// a shipment the carrier made must not be forgotten because we stop.
func (s *Shipper) Run(ctx context.Context) error {
	t := time.NewTicker(s.cfg.PollInterval)
	defer t.Stop()
	wctx := context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, s.cfg.Concurrency)
	for {
		if free := cap(slots) - len(slots); free > 0 {
			rows, err := shippingstore.Claim(ctx, s.cfg.Pool, free, s.cfg.Lease)
			if err != nil && ctx.Err() == nil {
				s.cfg.Log.Warn("shipper claim failed", "err", err)
			}
			// A freed slot claims again only if this claim filled every free
			// one: otherwise it took all that was due, and what becomes due
			// later (a retry's timer, a new shipment) wakes the worker.
			full := len(rows) == free
			for _, r := range rows {
				slots <- struct{}{}
				wg.Add(1)
				go func() {
					defer func() {
						<-slots
						if full {
							s.Nudge()
						}
						wg.Done()
					}()
					if err := s.Work(wctx, r); err != nil {
						s.cfg.Log.Warn("shipment attempt", "key", r.Key, "saga_id", r.SagaID, "err", err)
					}
				}()
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-s.wake.C():
		}
	}
}

// Work makes one attempt on a claimed shipment.
func (s *Shipper) Work(ctx context.Context, r shippingstore.Row) error {
	update := func(f func(*shipping.Shipment) []shipping.Reply) error {
		return shippingstore.Update(ctx, s.cfg.Pool, s.cfg.Outbox, r.ID, s.cfg.Now(), f)
	}
	switch shipping.Next(r.State(), s.cfg.Now()) {
	case shipping.Create:
		return s.create(ctx, r)
	case shipping.Lookup:
		sh, found, err := s.cfg.Carrier.Lookup(ctx, r.Key)
		s.count("lookup", err, found)
		switch {
		case err != nil:
			return s.retry(ctx, r, err)
		case found:
			return update(func(x *shipping.Shipment) []shipping.Reply { return x.Created(sh.ID, sh.TrackingNumber) })
		case r.CancelStatus == shipping.CancelPending:
			return update((*shipping.Shipment).NotFoundForCancel)
		}
		// No earlier call created anything: call again, with the same key.
		return s.create(ctx, r)
	case shipping.Cancel:
		_, err := s.cfg.Carrier.Cancel(ctx, r.CarrierID)
		s.count("cancel", err, true)
		switch {
		case err == nil:
			return update((*shipping.Shipment).Voided)
		case errors.Is(err, shippingcarrier.ErrShipped):
			return update(func(x *shipping.Shipment) []shipping.Reply { return x.CancelRefused(shipping.ReasonAlreadyShipped) })
		case errors.Is(err, shippingcarrier.ErrNotFound):
			return update(func(x *shipping.Shipment) []shipping.Reply { return x.CancelRefused(shipping.ReasonUnknownAtCarrier) })
		case errors.Is(err, shippingcarrier.ErrRefused):
			return update(func(x *shipping.Shipment) []shipping.Reply { return x.CancelRefused(shipping.ReasonRefused) })
		}
		return s.retry(ctx, r, err)
	case shipping.SettleCancelled:
		return update((*shipping.Shipment).NeverCreated)
	case shipping.GiveUpCreate:
		s.cfg.Log.Warn("shipment create gave up: the carrier did not answer within the step's budget", "key", r.Key, "saga_id", r.SagaID)
		return update((*shipping.Shipment).GiveUpCreate)
	case shipping.GiveUpCancel:
		s.cfg.Log.Warn("shipment cancel gave up: the carrier did not answer within the step's budget", "key", r.Key, "saga_id", r.SagaID)
		return update((*shipping.Shipment).GiveUpCancel)
	}
	// Nothing to do (the row changed since it was queued): save idles it.
	return update(func(*shipping.Shipment) []shipping.Reply { return nil })
}

func (s *Shipper) create(ctx context.Context, r shippingstore.Row) error {
	if err := shippingstore.CountCreateCall(ctx, s.cfg.Pool, r.ID); err != nil {
		if errors.Is(err, shippingstore.ErrChanged) {
			// A cancellation got there first: release the lease so the
			// row is decided again now rather than when it ends.
			return shippingstore.Update(ctx, s.cfg.Pool, s.cfg.Outbox, r.ID, s.cfg.Now(),
				func(*shipping.Shipment) []shipping.Reply { return nil })
		}
		return err
	}
	sh, err := s.cfg.Carrier.Create(ctx, r.Key, r.SagaID, r.Parcel)
	s.count("create", err, true)
	update := func(f func(*shipping.Shipment) []shipping.Reply) error {
		return shippingstore.Update(ctx, s.cfg.Pool, s.cfg.Outbox, r.ID, s.cfg.Now(), f)
	}
	var declined *shippingcarrier.DeclinedError
	switch {
	case err == nil:
		return update(func(x *shipping.Shipment) []shipping.Reply { return x.Created(sh.ID, sh.TrackingNumber) })
	case errors.As(err, &declined):
		return update(func(x *shipping.Shipment) []shipping.Reply { return x.Declined(declined.Code) })
	case errors.Is(err, shippingcarrier.ErrRefused):
		s.cfg.Log.Error("carrier refused a shipment request", "key", r.Key, "err", err)
		return update(func(x *shipping.Shipment) []shipping.Reply { return x.Declined(shipping.ReasonRefused) })
	}
	return s.retry(ctx, r, err)
}

// retry leaves the shipment to a later attempt with backoff, but never
// later than the step's deadline, where Next gives up.
func (s *Shipper) retry(ctx context.Context, r shippingstore.Row, cause error) error {
	at := s.cfg.Now().Add(backoff.Exponential(r.Attempts, s.cfg.FirstRetry, s.cfg.MaxRetry))
	dl := r.Create.Deadline
	if r.CancelStatus == shipping.CancelPending {
		dl = r.Cancel.Deadline
		if r.InternalCancel {
			dl = time.Time{}
		}
	}
	if !dl.IsZero() && at.After(dl) {
		at = dl
	}
	if err := shippingstore.RetryAt(ctx, s.cfg.Pool, r.ID, at, cause.Error()); err != nil {
		return err
	}
	s.wake.After(at.Sub(s.cfg.Now()))
	return nil
}

func (s *Shipper) count(kind string, err error, found bool) {
	var declined *shippingcarrier.DeclinedError
	outcome := "ok"
	switch {
	case err == nil && !found:
		outcome = "not_found"
	case err == nil:
	case errors.As(err, &declined):
		outcome = "declined"
	case errors.Is(err, shippingcarrier.ErrShipped):
		outcome = "shipped"
	case errors.Is(err, shippingcarrier.ErrNotFound):
		outcome = "not_found"
	case errors.Is(err, shippingcarrier.ErrRefused):
		outcome = "refused"
	default:
		outcome = "unavailable"
	}
	s.calls.WithLabelValues(kind, outcome).Inc()
}
