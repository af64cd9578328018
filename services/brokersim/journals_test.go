package brokersim

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestIdempotencyKeyReplaysTheJournalOrRefusesAnotherBody(t *testing.T) {
	h := newHarness(t, Config{})
	acct := h.account()
	first := h.journal(acct, "25.00", "key-1")
	if first["status"] != JournalExecuted {
		t.Fatalf("a single cash journal answered %v, want executed", first["status"])
	}
	// The same request again, its JSON written differently: the original
	// journal, no second one.
	var again map[string]any
	h.must(200, h.do("POST", "/v1/journals", `{"amount":"25.00","to_account":"`+acct+`","entry_type":"JNLC","from_account":"`+h.srv.FirmAccountID()+`"}`,
		map[string]string{"Idempotency-Key": "key-1"}, &again))
	if again["id"] != first["id"] {
		t.Fatalf("replay answered journal %v, want the original %v", again["id"], first["id"])
	}
	// The same key with another amount: 422 and nothing executed.
	res := h.do("POST", "/v1/journals", map[string]any{"entry_type": "JNLC", "from_account": h.srv.FirmAccountID(),
		"to_account": acct, "amount": "26.00"}, map[string]string{"Idempotency-Key": "key-1"}, nil)
	h.must(http.StatusUnprocessableEntity, res)
	var list []map[string]any
	h.must(200, h.do("GET", "/v1/journals?to_account="+acct, nil, nil, &list))
	if len(list) != 1 {
		t.Fatalf("%d journals for the account, want 1", len(list))
	}
	var ta map[string]any
	h.must(200, h.do("GET", "/v1/trading/accounts/"+acct+"/account", nil, nil, &ta))
	if ta["cash"] != "25.00" {
		t.Fatalf("cash %v, want 25.00: the money moved more than once", ta["cash"])
	}
	// Without a key every call is a new journal.
	h.journal(acct, "1.00", "")
	h.journal(acct, "1.00", "")
	h.must(200, h.do("GET", "/v1/journals?to_account="+acct, nil, nil, &list))
	if len(list) != 3 {
		t.Fatalf("%d journals, want 3", len(list))
	}
}

func TestJournalValidation(t *testing.T) {
	h := newHarness(t, Config{FirmCash: 100_00})
	acct, other := h.account(), h.account()
	firm := h.srv.FirmAccountID()
	for _, tc := range []struct {
		name   string
		body   map[string]any
		status int
	}{
		{"customer to customer", map[string]any{"entry_type": "JNLC", "from_account": acct, "to_account": other, "amount": "1"}, 422},
		{"unknown account", map[string]any{"entry_type": "JNLC", "from_account": firm, "to_account": "nope", "amount": "1"}, 404},
		{"securities", map[string]any{"entry_type": "JNLS", "from_account": firm, "to_account": acct, "symbol": "AAPL", "qty": "1"}, 422},
		{"bad amount", map[string]any{"entry_type": "JNLC", "from_account": firm, "to_account": acct, "amount": "1.001"}, 400},
		{"more than the firm has", map[string]any{"entry_type": "JNLC", "from_account": firm, "to_account": acct, "amount": "100.01"}, 403},
	} {
		if res := h.do("POST", "/v1/journals", tc.body, nil, nil); res.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, res.StatusCode, tc.status)
		}
	}
	long := make([]byte, 129)
	for i := range long {
		long[i] = 'k'
	}
	res := h.do("POST", "/v1/journals", map[string]any{"entry_type": "JNLC", "from_account": firm, "to_account": acct, "amount": "1"},
		map[string]string{"Idempotency-Key": string(long)}, nil)
	h.must(400, res)
	// A refused request is not remembered: the key still works.
	h.journal(acct, "1.00", "k")
}

func TestCorrectionCancelsTheOriginalAndIssuesANewJournal(t *testing.T) {
	h := newHarness(t, Config{})
	acct := h.account()
	journals := h.open("/v2/events/journals/status?since_id=00000000000000000000000000")
	activities := h.open("/v2beta1/events/activities?since_id=00000000000000000000000000")
	h.setFaults(map[string]string{"correction-rate": "1", "correction-delay": "10s"})
	orig := h.journal(acct, "50.00", "k-corr")
	origActs := activities.events(2)
	h.clock.Advance(10 * time.Second)

	evs := journals.events(3)
	if evs[0]["journal_id"] != orig["id"] || evs[0]["status_to"] != JournalExecuted {
		t.Fatalf("first event %v, want the original executed", evs[0])
	}
	if evs[1]["journal_id"] != orig["id"] || evs[1]["status_from"] != JournalExecuted || evs[1]["status_to"] != JournalCorrect {
		t.Fatalf("second event %v, want the original executed → correct", evs[1])
	}
	newID := evs[2]["journal_id"]
	if newID == orig["id"] || evs[2]["status_from"] != "" || evs[2]["status_to"] != JournalExecuted {
		t.Fatalf("third event %v, want a new journal id executed", evs[2])
	}
	var old, corrected map[string]any
	h.must(200, h.do("GET", "/v1/journals/"+orig["id"].(string), nil, nil, &old))
	h.must(200, h.do("GET", "/v1/journals/"+newID.(string), nil, nil, &corrected))
	if old["status"] != JournalCorrect || corrected["status"] != JournalExecuted || corrected["net_amount"] != "49.99" {
		t.Fatalf("original %v / %v, correction %v / %v", old["status"], old["net_amount"], corrected["status"], corrected["net_amount"])
	}
	// The correction's activities name the original's as previous_id.
	prev := map[string]string{}
	for _, a := range origActs {
		prev[a["account_id"].(string)] = a["ref_id"].(string)
	}
	for _, a := range activities.events(2) {
		if a["previous_id"] != prev[a["account_id"].(string)] || a["details"].(map[string]any)["journal_id"] != newID {
			t.Fatalf("correction activity %v does not link to the original's %v", a, prev)
		}
	}
	var ta map[string]any
	h.must(200, h.do("GET", "/v1/trading/accounts/"+acct+"/account", nil, nil, &ta))
	if ta["cash"] != "49.99" {
		t.Fatalf("cash %v after the correction, want 49.99", ta["cash"])
	}
	// The key still answers the original journal, now correct.
	again := h.journal(acct, "50.00", "k-corr")
	if again["id"] != orig["id"] || again["status"] != JournalCorrect {
		t.Fatalf("replay after correction: %v %v", again["id"], again["status"])
	}
}

func TestAdminCorrection(t *testing.T) {
	h := newHarness(t, Config{})
	acct := h.account()
	j := h.journal(acct, "10.00", "")
	var out map[string]string
	h.must(200, h.do("POST", "/__admin/journals/"+j["id"].(string)+"/correct", map[string]string{"amount": "12.00"}, nil, &out))
	if out["id"] == "" || out["id"] == j["id"] {
		t.Fatalf("admin correction answered %v", out)
	}
	h.must(400, h.do("POST", "/__admin/journals/"+j["id"].(string)+"/correct", map[string]string{"amount": "12.00"}, nil, nil))
}

func TestSlowSettlementQueuesTheJournal(t *testing.T) {
	h := newHarness(t, Config{})
	acct := h.account()
	h.setFaults(map[string]string{"slow-settlement-rate": "1", "slow-settlement-delay": "1m"})
	j := h.journal(acct, "5.00", "")
	if j["status"] != JournalQueued {
		t.Fatalf("status %v, want queued", j["status"])
	}
	h.clock.Advance(time.Minute)
	eventually(t, "the journal executes", func() bool {
		var got map[string]any
		h.must(200, h.do("GET", "/v1/journals/"+j["id"].(string), nil, nil, &got))
		return got["status"] == JournalExecuted
	})
}

// The timeout a client cannot tell from a failure: the journal is made,
// the answer never comes. A retry with the same key gets that journal.
func TestRetryAfterAHungAnswerGetsTheSameJournal(t *testing.T) {
	h := newHarness(t, Config{})
	acct := h.account()
	h.setFaults(map[string]string{"hang-rate": "1"})
	body := `{"entry_type":"JNLC","from_account":"` + h.srv.FirmAccountID() + `","to_account":"` + acct + `","amount":"7.00"}`
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "POST", h.http.URL+"/v1/journals", strings.NewReader(body))
	req.SetBasicAuth("CK_TEST", "secret")
	req.Header.Set("Idempotency-Key", "hung-key")
	failed := make(chan error, 1)
	go func() {
		res, err := h.http.Client().Do(req)
		if err == nil {
			res.Body.Close()
		}
		failed <- err
	}()
	eventually(t, "the hung request to execute", func() bool { return h.srv.Stats().Hung == 1 })
	cancel() // the client gives up
	if err := <-failed; err == nil {
		t.Fatal("the hung request was answered")
	}
	h.setFaults(map[string]string{"hang-rate": "0"})
	var list []map[string]any
	h.must(200, h.do("GET", "/v1/journals", nil, nil, &list))
	if len(list) != 1 {
		t.Fatalf("%d journals after the hung request, want 1 (it executed)", len(list))
	}
	var again map[string]any
	h.must(200, h.do("POST", "/v1/journals", body, map[string]string{"Idempotency-Key": "hung-key"}, &again))
	if again["id"] != list[0]["id"] {
		t.Fatalf("retry made journal %v, want %v", again["id"], list[0]["id"])
	}
}

func TestConcurrentRetriesMakeOneJournal(t *testing.T) {
	h := newHarness(t, Config{})
	acct := h.account()
	body := `{"entry_type":"JNLC","from_account":"` + h.srv.FirmAccountID() + `","to_account":"` + acct + `","amount":"2.00"}`
	got := make(chan any, 8)
	for range 8 {
		go func() { // no t.Fatal off the test goroutine: a failure sends an error instead of an id
			req, _ := http.NewRequest("POST", h.http.URL+"/v1/journals", strings.NewReader(body))
			req.SetBasicAuth("CK_TEST", "secret")
			req.Header.Set("Idempotency-Key", "same")
			res, err := h.http.Client().Do(req)
			if err != nil {
				got <- err
				return
			}
			defer res.Body.Close()
			var j map[string]any
			if err := json.NewDecoder(res.Body).Decode(&j); err != nil {
				got <- err
				return
			}
			got <- j["id"]
		}()
	}
	first := <-got
	for range 7 {
		if id := <-got; id != first {
			t.Fatalf("concurrent calls with one key answered journals %v and %v", first, id)
		}
	}
}

func TestDeleteCancelsOnlyAQueuedJournal(t *testing.T) {
	h := newHarness(t, Config{})
	acct := h.account()
	done := h.journal(acct, "1.00", "")
	h.setFaults(map[string]string{"slow-settlement-rate": "1", "slow-settlement-delay": "1m"})
	queued := h.journal(acct, "2.00", "")
	h.must(422, h.do("DELETE", "/v1/journals/"+done["id"].(string), nil, nil, nil))
	h.must(404, h.do("DELETE", "/v1/journals/nope", nil, nil, nil))
	h.must(204, h.do("DELETE", "/v1/journals/"+queued["id"].(string), nil, nil, nil))
	h.clock.Advance(time.Minute)
	var list []map[string]any
	h.must(200, h.do("GET", "/v1/journals?status=canceled", nil, nil, &list))
	if len(list) != 1 || list[0]["id"] != queued["id"] {
		t.Fatalf("canceled journals %v", list)
	}
	var ta map[string]any
	h.must(200, h.do("GET", "/v1/trading/accounts/"+acct+"/account", nil, nil, &ta))
	if ta["cash"] != "1.00" {
		t.Fatalf("cash %v: the canceled journal moved money", ta["cash"])
	}
}
