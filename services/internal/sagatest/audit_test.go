package sagatest

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/concordhq/concord/services/audit"
	"github.com/concordhq/concord/services/audit/auditsnapshot"
	"github.com/concordhq/concord/services/payment/paymentprovider"
)

// terminalBound is how long an order may take to a terminal state in these
// tests (the longest any of them waits for one).
const terminalBound = time.Minute

// stocked is what a deployment was stocked with, per SKU, for the audit's
// stock check; scenarios sharing a deployment add to it in parallel.
type stocked struct {
	mu    sync.Mutex
	units map[string]int64
}

func (s *stocked) add(sku string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.units[sku] += int64(n)
}

func (s *stocked) copy() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]int64, len(s.units))
	for k, v := range s.units {
		m[k] = v
	}
	return m
}

// audit waits until the deployment keeps every cross-service invariant
// (audit.Saga): the saga may still be settling when a scenario's own
// checks pass, so it reads until the checks hold or 30s pass.
func (s *saga) audit() {
	s.t.Helper()
	gw, err := paymentprovider.New(paymentprovider.Config{APIKey: apiKey, BaseURL: s.simURL})
	if err != nil {
		s.t.Fatal(err)
	}
	eventually(s.t, 30*time.Second, "the saga's invariants", func() error {
		snap, err := auditsnapshot.Read(context.Background(), auditsnapshot.Sources{Orders: s.orders, Inventory: s.inventory,
			Payments: s.payment, Orchestrator: s.orchestrator, Shipping: s.shipping, Provider: gw})
		if err != nil {
			return err
		}
		var failed []error
		for _, r := range audit.Saga(snap, terminalBound, s.stocked.copy()) {
			if !r.Holds() {
				failed = append(failed, errors.New(r.Check+": "+r.Detail()))
			}
		}
		return errors.Join(failed...)
	})
}
