package providersim_test

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v84"

	"github.com/concordhq/concord/services/providersim"
)

// A change whose snapshot is being written must not be told to anyone
// before the write ends: a read of it, or a replay of the request that made
// it, waits like the request itself. Otherwise a SIGKILL during the write
// takes back what a client was already told (a capture it recorded, then
// found authorized again after the restart).
func TestNothingUnwrittenIsToldWhileItsSnapshotIsInFlight(t *testing.T) {
	var armed atomic.Bool
	entered, gate := make(chan struct{}, 1), make(chan struct{})
	var release sync.Once
	open := func() { release.Do(func() { close(gate) }) }
	t.Cleanup(providersim.HookSnapshotWrites(func() {
		if armed.CompareAndSwap(true, false) {
			entered <- struct{}{}
			<-gate
		}
	}))
	h := start(t, providersim.Config{DataDir: t.TempDir(), HoldExpiry: time.Minute})
	t.Cleanup(open) // before the simulator's Close, which snapshots once more
	sc := h.client()
	pi := h.authorize(sc, 300, "hold")

	armed.Store(true)
	captured := make(chan error, 1)
	go func() {
		_, err := capture(t, sc, pi.ID, 0, "cap")
		captured <- err
	}()
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the capture's snapshot was never written")
	}

	// The snapshot holding the capture is in flight: nothing may say it
	// happened yet. Each call gets a moment to answer, as it would if it
	// did not wait.
	brief := h.clientWith(testKey, &http.Client{Timeout: 300 * time.Millisecond})
	if got, err := brief.V1PaymentIntents.Retrieve(t.Context(), pi.ID, nil); err == nil {
		t.Fatalf("a read answered %s while the snapshot holding it was unwritten", got.Status)
	}
	if got, err := capture(t, brief, pi.ID, 0, "cap"); err == nil {
		t.Fatalf("a replay answered %s while the snapshot holding it was unwritten", got.Status)
	}

	open()
	if err := <-captured; err != nil {
		t.Fatalf("capture: %v", err)
	}
	got, err := sc.V1PaymentIntents.Retrieve(t.Context(), pi.ID, nil)
	if err != nil || got.Status != stripe.PaymentIntentStatusSucceeded {
		t.Fatalf("after the write: %v %+v", err, got)
	}
}
