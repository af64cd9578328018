package providersim_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/concordhq/concord/services/providersim"
	"github.com/stripe/stripe-go/v84"
)

func TestListPaginationAndCreatedWindowsVisitEveryPaymentOnce(t *testing.T) {
	h := start(t, providersim.Config{})
	sc := h.client()
	t0 := h.clock.Now()
	var ids []string // in creation order: second 0 holds payment 0, second k holds 2k-1 and 2k
	for i := range 30 {
		pi := h.mustCreate(sc, providersim.PaymentMethodVisa, int64(100+i), fmt.Sprintf("k%d", i))
		ids = append(ids, pi.ID)
		if i%2 == 0 {
			h.clock.Advance(time.Second)
		}
	}
	// created in [t0+3s, t0+11s]: seconds 3..11 hold payments 5..22.
	want := map[string]bool{}
	for _, id := range ids[5:23] {
		want[id] = true
	}
	for _, limit := range []int64{1, 4, 7, 100} {
		t.Run(fmt.Sprintf("limit=%d", limit), func(t *testing.T) {
			seen := map[string]int{}
			var order []int64
			cursor := ""
			pages := 0
			for {
				p := &stripe.PaymentIntentListParams{CreatedRange: &stripe.RangeQueryParams{
					GreaterThanOrEqual: t0.Add(3 * time.Second).Unix(), LesserThanOrEqual: t0.Add(11 * time.Second).Unix()}}
				p.Limit = stripe.Int64(limit)
				p.Single = true
				if cursor != "" {
					p.StartingAfter = stripe.String(cursor)
				}
				n := 0
				for pi, err := range sc.V1PaymentIntents.List(t.Context(), p) {
					if err != nil {
						t.Fatal(err)
					}
					seen[pi.ID]++
					order = append(order, pi.Created)
					cursor = pi.ID
					n++
				}
				pages++
				// Creating payments while paging must not disturb the walk.
				h.mustCreate(sc, providersim.PaymentMethodVisa, 1, fmt.Sprintf("during-%d-%d", limit, pages))
				if int64(n) < limit || pages > 100 {
					break
				}
			}
			for id := range want {
				if seen[id] != 1 {
					t.Errorf("%s seen %d times, want once", id, seen[id])
				}
			}
			for id := range seen {
				if !want[id] {
					t.Errorf("%s is outside the window", id)
				}
			}
			for i := 1; i < len(order); i++ {
				if order[i] > order[i-1] {
					t.Fatalf("not newest first: %v", order)
				}
			}
		})
	}
	// stripe-go's auto-paging iterator sees them all too.
	p := &stripe.PaymentIntentListParams{CreatedRange: &stripe.RangeQueryParams{LesserThan: t0.Add(16 * time.Second).Unix()}}
	p.Limit = stripe.Int64(3)
	n := 0
	for pi, err := range sc.V1PaymentIntents.List(t.Context(), p) {
		if err != nil {
			t.Fatal(err)
		}
		if pi.Amount >= 100 { // not one of the payments made while paging
			n++
		}
	}
	if n != 30 {
		t.Fatalf("auto-paging saw %d payments, want 30", n)
	}
}

func TestListEndingBeforePagesTowardNewer(t *testing.T) {
	h := start(t, providersim.Config{})
	sc := h.client()
	var ids []string
	for i := range 5 {
		ids = append(ids, h.mustCreate(sc, providersim.PaymentMethodVisa, 100, fmt.Sprintf("e%d", i)).ID)
	}
	p := &stripe.PaymentIntentListParams{}
	p.EndingBefore = stripe.String(ids[1])
	p.Limit = stripe.Int64(2)
	p.Single = true
	var got []string
	for pi, err := range sc.V1PaymentIntents.List(t.Context(), p) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, pi.ID)
	}
	// stripe-go reverses ending_before pages into forward (oldest first) order.
	if len(got) != 2 || got[0] != ids[2] || got[1] != ids[3] {
		t.Fatalf("ending_before %s limit 2 gave %v, want [%s %s]", ids[1], got, ids[2], ids[3])
	}
}
