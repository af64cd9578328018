package providersim_test

import (
	"fmt"
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

// A simulator killed with SIGKILL writes no final snapshot: what it left on
// disk is all a restart has. crashCopy is that: the data dir as it is
// while the simulator still runs, started as a second simulator.
func crashCopy(t *testing.T, dir string) *harness {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatalf("nothing on disk: %v", err)
	}
	crashed := t.TempDir()
	if err := os.WriteFile(filepath.Join(crashed, "state.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return start(t, providersim.Config{DataDir: crashed})
}

// Every answer waits for the state it shows to be written: after a crash
// the simulator knows every payment and key it answered, and hands out no
// id a second time.
func TestACrashForgetsNoPaymentOrKeyAClientWasTold(t *testing.T) {
	dir := t.TempDir()
	// Only the answers' own writes can put state on disk.
	h := start(t, providersim.Config{DataDir: dir, SnapshotInterval: time.Hour})
	sc := h.client()
	var answered []*stripe.PaymentIntent
	for i := range 5 {
		answered = append(answered, h.mustCreate(sc, providersim.PaymentMethodVisa, int64(100+i), fmt.Sprintf("key-%d", i)))
	}
	after := crashCopy(t, dir)
	asc := after.client()
	for _, pi := range answered {
		got, err := asc.V1PaymentIntents.Retrieve(t.Context(), pi.ID, nil)
		if err != nil || got.Amount != pi.Amount {
			t.Fatalf("payment %s answered before the crash is lost: %v", pi.ID, err)
		}
	}
	if again := after.mustCreate(asc, providersim.PaymentMethodVisa, 104, "key-4"); again.ID != answered[4].ID {
		t.Fatalf("key-4 after the crash gives %s, want a replay of %s", again.ID, answered[4].ID)
	}
	next := after.mustCreate(asc, providersim.PaymentMethodVisa, 999, "new")
	for _, pi := range answered {
		if next.ID == pi.ID {
			t.Fatalf("after the crash the id %s was handed out again", pi.ID)
		}
	}
}

// A webhook is sent only once its event is written: after a crash the
// simulator knows every event it delivered, here one a scheduled
// transition made (no request waited for it).
func TestACrashForgetsNoEventItDelivered(t *testing.T) {
	dir := t.TempDir()
	ep := newEndpoint(t)
	f := providersim.DefaultFaults()
	f.ProcessingDelay = time.Minute
	h := start(t, providersim.Config{DataDir: dir, SnapshotInterval: time.Hour, Faults: f, WebhookEndpoints: []string{ep.ts.URL},
		WebhookSecret: "whsec_crash", WebhookEvents: []string{"payment_intent.succeeded"}})
	slow := h.mustCreate(h.client(), providersim.PaymentMethodProcessing, 300, "slow")
	h.clock.Advance(time.Minute)
	eventually(t, "the success webhook of the processing payment", func() bool { return ep.count() == 1 })
	d := ep.received()[0]
	if d.Data.Object.ID != slow.ID {
		t.Fatalf("delivered %s for %s, want %s", d.Type, d.Data.Object.ID, slow.ID)
	}
	known := false
	for _, ev := range allEvents(t, crashCopy(t, dir).client(), nil) {
		known = known || ev.ID == d.ID
	}
	if !known {
		t.Fatalf("event %s was delivered before the crash and is unknown after it", d.ID)
	}
}
