package brokersim

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

func TestRateLimitHeadersOnEveryResponse(t *testing.T) {
	h := newHarness(t, Config{RateLimit: 3})
	reset := strconv.FormatInt(t0.Add(time.Minute).Unix(), 10)
	for i, want := range []struct {
		status    int
		remaining string
	}{{200, "2"}, {200, "1"}, {200, "0"}, {429, "0"}} {
		res := h.do("GET", "/v1/accounts", nil, nil, nil)
		if res.StatusCode != want.status || res.Header.Get("X-RateLimit-Limit") != "3" ||
			res.Header.Get("X-RateLimit-Remaining") != want.remaining || res.Header.Get("X-RateLimit-Reset") != reset {
			t.Fatalf("request %d: %d, headers %v", i+1, res.StatusCode, res.Header)
		}
	}
	h.clock.Advance(time.Minute)
	h.must(200, h.do("GET", "/v1/accounts", nil, nil, nil))
	// Unauthenticated answers count and carry the headers too.
	res, err := http.Get(h.http.URL + "/v1/accounts")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 401 || res.Header.Get("X-RateLimit-Remaining") != "1" {
		t.Fatalf("unauthenticated: %d, %v", res.StatusCode, res.Header)
	}
}

func TestInjectedErrorsHaveNoEffect(t *testing.T) {
	h := newHarness(t, Config{})
	acct := h.account()
	h.setFaults(map[string]string{"5xx-rate": "1"})
	body := map[string]any{"entry_type": "JNLC", "from_account": h.srv.FirmAccountID(), "to_account": acct, "amount": "3.00"}
	h.must(500, h.do("POST", "/v1/journals", body, map[string]string{"Idempotency-Key": "k"}, nil))
	h.setFaults(map[string]string{"5xx-rate": "0", "429-rate": "1"})
	h.must(429, h.do("POST", "/v1/journals", body, map[string]string{"Idempotency-Key": "k"}, nil))
	h.setFaults(map[string]string{"429-rate": "0"})
	h.journal(acct, "3.00", "k")
	var list []map[string]any
	h.must(200, h.do("GET", "/v1/journals", nil, nil, &list))
	if len(list) != 1 {
		t.Fatalf("%d journals after two refused attempts and one success, want 1", len(list))
	}
}

func TestAdminFaults(t *testing.T) {
	h := newHarness(t, Config{})
	var got map[string]string
	h.must(200, h.do("POST", "/__admin/faults", map[string]string{"sse-drop-rate": "0.5", "return-delay": "1m"}, nil, &got))
	if got["sse-drop-rate"] != "0.5" || h.srv.Faults().ReturnDelay != time.Minute {
		t.Fatalf("faults %v", got)
	}
	h.must(400, h.do("POST", "/__admin/faults", map[string]string{"sse-drop-rate": "2"}, nil, nil))
	h.must(400, h.do("POST", "/__admin/faults", map[string]string{"no-such": "1"}, nil, nil))
	if h.srv.Faults().SSEDropRate != 0.5 {
		t.Fatal("a refused change was applied")
	}
}

func TestSameSeedSameIDs(t *testing.T) {
	a, b := newHarness(t, Config{Seed: 3}), newHarness(t, Config{Seed: 3})
	if a.srv.FirmAccountID() != b.srv.FirmAccountID() || a.account() != b.account() {
		t.Fatal("two simulators with one seed handed out different ids")
	}
}
