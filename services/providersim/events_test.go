package providersim_test

import (
	"slices"
	"testing"
	"time"

	"github.com/concordhq/concord/services/providersim"
	"github.com/stripe/stripe-go/v84"
)

// allEvents lists every event with stripe-go, oldest first.
func allEvents(t *testing.T, sc *stripe.Client, p *stripe.EventListParams) []*stripe.Event {
	t.Helper()
	out, err := listEvents(t, sc, p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// listEvents is allEvents returning the list's error: a page cursor that
// expires between two pages is refused (resource_missing), as on Stripe.
func listEvents(t *testing.T, sc *stripe.Client, p *stripe.EventListParams) ([]*stripe.Event, error) {
	if p == nil {
		p = &stripe.EventListParams{}
	}
	p.Limit = stripe.Int64(2) // force several pages
	var out []*stripe.Event
	for ev, err := range sc.V1Events.List(t.Context(), p) {
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	slices.Reverse(out)
	return out, nil
}

func TestEventsListMatchesStateChanges(t *testing.T) {
	f := providersim.DefaultFaults()
	f.ProcessingDelay = 10 * time.Second
	h := start(t, providersim.Config{Faults: f})
	sc := h.client()
	ok := h.mustCreate(sc, providersim.PaymentMethodVisa, 100, "ok")
	_, err := h.create(sc, providersim.PaymentMethodDeclined, 200, "declined")
	declined := stripeErr(t, err).PaymentIntent
	slow := h.mustCreate(sc, providersim.PaymentMethodProcessing, 300, "slow")
	if _, err := sc.V1Refunds.Create(t.Context(), &stripe.RefundCreateParams{PaymentIntent: stripe.String(ok.ID)}); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(10 * time.Second)
	eventually(t, "processing payment to resolve", func() bool {
		pi, err := sc.V1PaymentIntents.Retrieve(t.Context(), slow.ID, nil)
		return err == nil && pi.Status == stripe.PaymentIntentStatusSucceeded
	})

	type change struct{ typ, object string }
	want := []change{
		{"payment_intent.created", ok.ID}, {"charge.succeeded", ok.LatestCharge.ID}, {"payment_intent.succeeded", ok.ID},
		{"payment_intent.created", declined.ID}, {"payment_intent.payment_failed", declined.ID},
		{"payment_intent.created", slow.ID}, {"payment_intent.processing", slow.ID},
		{"refund.created", ""}, {"charge.refunded", ok.LatestCharge.ID},
		{"charge.succeeded", ""}, {"payment_intent.succeeded", slow.ID},
	}
	got := allEvents(t, sc, nil)
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i, ev := range got {
		id, _ := ev.Data.Object["id"].(string)
		if string(ev.Type) != want[i].typ || (want[i].object != "" && id != want[i].object) {
			t.Errorf("event %d is %s on %s, want %s on %s", i, ev.Type, id, want[i].typ, want[i].object)
		}
		if ev.APIVersion != stripe.APIVersion {
			t.Errorf("event %s api_version %s, want the SDK's %s", ev.ID, ev.APIVersion, stripe.APIVersion)
		}
	}
	// The object in an event is the state right after the change.
	if st := got[4].Data.Object["status"]; st != "requires_payment_method" || got[4].Data.PreviousAttributes["status"] != "requires_confirmation" {
		t.Errorf("payment_failed carries status %v (previous %v)", st, got[4].Data.PreviousAttributes)
	}

	// Filters: type with a wildcard, and a created window.
	p := &stripe.EventListParams{Type: stripe.String("payment_intent.*")}
	if n := len(allEvents(t, sc, p)); n != 7 {
		t.Errorf("payment_intent.* matched %d events, want 7", n)
	}
	p = &stripe.EventListParams{CreatedRange: &stripe.RangeQueryParams{GreaterThanOrEqual: h.clock.Now().Unix()}}
	if n := len(allEvents(t, sc, p)); n != 2 {
		t.Errorf("created >= now matched %d events, want the 2 from the resolution", n)
	}

	ev, err := sc.V1Events.Retrieve(t.Context(), got[2].ID, nil)
	if err != nil || ev.ID != got[2].ID || ev.Type != "payment_intent.succeeded" {
		t.Fatalf("retrieve event: %v %+v", err, ev)
	}
	_, err = sc.V1Events.Retrieve(t.Context(), "evt_missing", nil)
	if se := stripeErr(t, err); se.HTTPStatusCode != 404 || se.Code != stripe.ErrorCodeResourceMissing {
		t.Fatalf("unknown event: %d %s", se.HTTPStatusCode, se.Code)
	}
}

func TestDefaultAPIVersionIsTheSDKs(t *testing.T) {
	if providersim.DefaultAPIVersion != stripe.APIVersion {
		t.Fatalf("providersim.DefaultAPIVersion %s != stripe.APIVersion %s: stripe-go's webhook check would reject our events",
			providersim.DefaultAPIVersion, stripe.APIVersion)
	}
}

func TestEventsAreKeptFor30Days(t *testing.T) {
	h := start(t, providersim.Config{})
	sc := h.client()
	h.mustCreate(sc, providersim.PaymentMethodVisa, 100, "old")
	h.clock.Advance(providersim.EventRetention - time.Second)
	h.mustCreate(sc, providersim.PaymentMethodVisa, 100, "new")
	if n := len(allEvents(t, sc, nil)); n != 6 {
		t.Fatalf("%d events inside the retention, want 6", n)
	}
	h.clock.Advance(2 * time.Second)
	// The scheduler expires events while the list pages through them; a
	// list whose cursor expired under it is read again.
	eventually(t, "old events to expire", func() bool {
		evs, err := listEvents(t, sc, nil)
		return err == nil && len(evs) == 3
	})
}
