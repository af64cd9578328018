package reconcilerbroker

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concordhq/concord/services/funding"
	"github.com/concordhq/concord/services/funding/fundingbroker"
	"github.com/concordhq/concord/services/reconciler"
)

// limitedBroker answers GET /v1/journals/{id}: the first limited calls
// with 429 and the X-RateLimit-Reset of the next whole second after the
// first of them (unix seconds, as the broker sends it), the rest with the
// journal; an id
// "missing" with 404. It records when each call came.
func limitedBroker(t *testing.T, limited int) (*Reader, *atomic.Int64, *time.Time) {
	t.Helper()
	var n atomic.Int64
	var reset time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Path[len("/v1/journals/"):]
		if id == "missing" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"code":40410000,"message":"journal not found"}`))
			return
		}
		if int(n.Add(1)) <= limited {
			if reset.IsZero() {
				reset = time.Now().Truncate(time.Second).Add(time.Second)
			}
			w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"code":42910000,"message":"rate limit exceeded"}`))
			return
		}
		_, _ = w.Write([]byte(`{"id":"` + id + `","entry_type":"JNLC","from_account":"firm","to_account":"acct","status":"executed",` +
			`"net_amount":"12.34","currency":"USD","created_at":"2026-12-03T08:00:00Z"}`))
	}))
	t.Cleanup(srv.Close)
	c := &fundingbroker.Client{BaseURL: srv.URL, KeyID: "k", Secret: "s", HTTP: &http.Client{Timeout: 5 * time.Second}}
	return &Reader{Client: c, Streams: c, Firm: "firm"}, &n, &reset
}

// A 429 is waited out until the X-RateLimit-Reset it names, then the
// call is tried again: the answer comes, no sooner than the reset.
func TestA429IsWaitedOutUntilItsReset(t *testing.T) {
	r, n, reset := limitedBroker(t, 2)
	start := time.Now()
	rec, err := r.Journal(context.Background(), "j-1")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Domain != funding.Journal || rec.AccountID != "acct" || rec.Direction != "credit" || rec.Amount != 1234 || rec.Status != "executed" {
		t.Fatalf("record %+v", rec)
	}
	if r.Calls() != 3 || r.RateLimited() != 2 || n.Load() != 3 {
		t.Fatalf("%d calls, %d answered 429 (server saw %d); want 3 and 2", r.Calls(), r.RateLimited(), n.Load())
	}
	if done := time.Now(); done.Before(*reset) {
		t.Fatalf("answered %v after the start, before the reset %v after it: the 429 was not waited out",
			done.Sub(start), reset.Sub(start))
	}
}

// Past --rate-limit-attempts the broker is unavailable (the row is
// unverifiable, never "not found"); a 404 is not found.
func TestTheReadersErrorsSayWhatTheBrokerAnswered(t *testing.T) {
	r, _, _ := limitedBroker(t, 100)
	r.Attempts = 2
	_, err := r.Journal(context.Background(), "j-1")
	if !errors.Is(err, reconciler.ErrProviderUnavailable) || errors.Is(err, reconciler.ErrProviderNotFound) || r.Calls() != 2 {
		t.Fatalf("after 2 attempts answered 429: %v (%d calls); want unavailable after 2 calls", err, r.Calls())
	}
	ok, _, _ := limitedBroker(t, 0)
	if _, err := ok.Journal(context.Background(), "missing"); !errors.Is(err, reconciler.ErrProviderNotFound) {
		t.Fatalf("404: %v; want not found", err)
	}
}
