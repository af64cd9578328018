package providersim_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/concordhq/concord/services/providersim"
	"github.com/stripe/stripe-go/v84"
)

func TestRestartWithDataDirKeepsPaymentsEventsAndKeys(t *testing.T) {
	dir := t.TempDir()
	f := providersim.DefaultFaults()
	f.ProcessingDelay = time.Minute
	h := start(t, providersim.Config{DataDir: dir, Faults: f})
	sc := h.client()
	ok := h.mustCreate(sc, providersim.PaymentMethodVisa, 100, "a")
	slow := h.mustCreate(sc, providersim.PaymentMethodProcessing, 200, "b")
	rf, err := sc.V1Refunds.Create(t.Context(), &stripe.RefundCreateParams{PaymentIntent: stripe.String(ok.ID)})
	if err != nil {
		t.Fatal(err)
	}
	eventsBefore := allEvents(t, sc, nil)

	h.restart()
	if _, err := os.Stat(filepath.Join(dir, "state.json")); err != nil {
		t.Fatalf("no snapshot: %v", err)
	}
	got, err := sc.V1PaymentIntents.Retrieve(t.Context(), ok.ID, nil)
	if err != nil || got.Status != stripe.PaymentIntentStatusSucceeded {
		t.Fatalf("payment lost in restart: %v %v", err, got)
	}
	if r, err := sc.V1Refunds.Retrieve(t.Context(), rf.ID, nil); err != nil || r.Amount != 100 {
		t.Fatalf("refund lost in restart: %v %v", err, r)
	}
	eventsAfter := allEvents(t, sc, nil)
	if len(eventsAfter) != len(eventsBefore) {
		t.Fatalf("%d events after restart, %d before", len(eventsAfter), len(eventsBefore))
	}
	for i := range eventsBefore {
		if eventsBefore[i].ID != eventsAfter[i].ID {
			t.Fatalf("event %d: %s became %s", i, eventsBefore[i].ID, eventsAfter[i].ID)
		}
	}
	// Idempotency keys survive: the same request replays.
	again := h.mustCreate(sc, providersim.PaymentMethodVisa, 100, "a")
	if again.ID != ok.ID || again.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("key a now gives %s, want a replay of %s", again.ID, ok.ID)
	}
	// Random streams continue where they were: new objects get new ids.
	fresh := h.mustCreate(sc, providersim.PaymentMethodVisa, 100, "c")
	ids := map[string]bool{ok.ID: true, slow.ID: true}
	if ids[fresh.ID] {
		t.Fatalf("restart handed out %s again", fresh.ID)
	}
	for _, ev := range allEvents(t, sc, nil) {
		if ids[ev.ID] {
			t.Fatalf("restart handed out event id %s again", ev.ID)
		}
		ids[ev.ID] = true
	}
	// Scheduled transitions survive too.
	h.clock.Advance(time.Minute)
	eventually(t, "processing payment to resolve after restart", func() bool {
		pi, err := sc.V1PaymentIntents.Retrieve(t.Context(), slow.ID, nil)
		return err == nil && pi.Status == stripe.PaymentIntentStatusSucceeded
	})
}

func TestCorruptSnapshotRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := providersim.New(providersim.Config{DataDir: dir}); err == nil {
		t.Fatal("started on a corrupt snapshot")
	}
}
