package reconcilerstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/concordhq/concord/services/providersim"
	"github.com/concordhq/concord/services/reconciler"
	"github.com/concordhq/concord/services/reconciler/reconcilerstore"
)

// TestHealRepairsAMissedWebhookOnceAndIsSafeToRerun: the provider's event
// stream shows a success our record never got. Heal records one finding and
// one command; running the same window again adds nothing. A payment whose
// latest event is stale (the provider changed it without an event) is left
// to the scan, and its finding is not cleared by the stale snapshot.
func TestHealRepairsAMissedWebhookOnceAndIsSafeToRerun(t *testing.T) {
	ctx := context.Background()
	pool := newDB(t)
	ps := newSim(t, providersim.Config{})
	lost := ps.charge(t, "heal-lost", providersim.PaymentMethodVisa)
	fine := ps.charge(t, "heal-fine", providersim.PaymentMethodVisa)
	stale := ps.charge(t, "heal-stale", providersim.PaymentMethodVisa)
	if err := ps.srv.ForceStatus(stale.ProviderID, providersim.StatusCanceled, false); err != nil {
		t.Fatal(err)
	}
	seed(t, pool, 1, reconciler.LocalPending, func(int) string { return lost.ProviderID })
	seed(t, pool, 1, reconciler.LocalPaid, func(int) string { return fine.ProviderID })
	seed(t, pool, 1, reconciler.LocalPaid, func(int) string { return stale.ProviderID })

	store := reconcilerstore.New(pool)
	h, err := reconciler.NewHealer(reconciler.HealerConfig{Store: store, Events: ps.p, Provider: ps.p})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	heal := func(name string, wantOpened, wantCommands int) {
		t.Helper()
		rep, err := h.Heal(ctx, now.Add(-time.Hour), now.Add(time.Minute))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if rep.Payments != 3 || rep.Unknown != 0 {
			t.Fatalf("%s: %d payments, %d unknown", name, rep.Payments, rep.Unknown)
		}
		if rep.FindingsOpened != wantOpened || rep.CommandsEmitted != wantCommands {
			t.Fatalf("%s: %d findings, %d commands; want %d and %d", name, rep.FindingsOpened, rep.CommandsEmitted, wantOpened, wantCommands)
		}
	}
	heal("first heal", 1, 1)
	heal("second heal of the same window", 0, 0)

	// The change without an event is the scan's to find; a heal after it
	// must not clear that finding on the strength of its stale snapshot.
	s := newScanner(t, pool, ps.p, nil)
	rep, err := s.RunCycle(ctx)
	if err != nil || rep.FindingsOpened != 1 || rep.CommandsEmitted != 0 {
		t.Fatalf("scan: %v, %d findings, %d commands; want 1 and 0", err, rep.FindingsOpened, rep.CommandsEmitted)
	}
	heal("heal after the scan", 0, 0)

	kinds := map[reconciler.Kind]reconciler.Source{}
	fs, err := store.Findings(ctx, reconcilerstore.FindingFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		kinds[f.Kind] = f.Source
	}
	if kinds[reconciler.KindMissedSuccess] != reconciler.SourceHeal || kinds[reconciler.KindPaidLocallyNotExternally] != reconciler.SourceScan || len(fs) != 2 {
		t.Fatalf("open findings %+v", fs)
	}
	if n := count(t, pool, `select count(*) from outbox where event_type = 'payment.apply_succeeded'`); n != 1 {
		t.Fatalf("%d commands, want 1", n)
	}
}
