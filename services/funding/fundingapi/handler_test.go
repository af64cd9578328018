package fundingapi_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/concordhq/concord/services/brokersim"
	"github.com/concordhq/concord/services/funding/fundingapi"
	"github.com/concordhq/concord/services/funding/fundingjournal"
	"github.com/concordhq/concord/services/funding/fundingtest"
)

func TestSubmitIsIdempotentPerRequestAndSaysWhenTheOutcomeIsUnknown(t *testing.T) {
	rail := fundingtest.New(t, brokersim.Config{Seed: 31})
	mux := http.NewServeMux()
	(&fundingapi.Handler{Store: rail.Store, Writer: &fundingjournal.Writer{Store: rail.Store, Broker: rail.Client(300 * time.Millisecond), FirmAccount: rail.Firm}}).Register(mux)
	api := httptest.NewServer(mux)
	defer api.Close()
	acct := rail.Account()
	post := func(req fundingapi.JournalRequest) (int, fundingapi.Movement) {
		t.Helper()
		b, _ := json.Marshal(req)
		res, err := http.Post(api.URL+"/v1/funding/journals", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var m fundingapi.Movement
		_ = json.NewDecoder(res.Body).Decode(&m)
		return res.StatusCode, m
	}
	dep := fundingapi.JournalRequest{RequestID: "r-1", AccountID: acct, Kind: "deposit", Amount: 1200}
	code, first := post(dep)
	if code != http.StatusOK || first.BrokerID == "" || first.Status != "PENDING" {
		t.Fatalf("deposit: %d %+v", code, first)
	}
	if code, again := post(dep); code != http.StatusOK || again.BrokerID != first.BrokerID {
		t.Fatalf("the same request again: %d %+v, want journal %s", code, again, first.BrokerID)
	}
	other := dep
	other.Amount = 1300
	if code, _ := post(other); code != http.StatusConflict {
		t.Fatalf("another amount under the request id: %d, want 409", code)
	}
	if code, _ := post(fundingapi.JournalRequest{RequestID: "r-2", AccountID: acct, Kind: "gift", Amount: 1}); code != http.StatusBadRequest {
		t.Fatalf("unknown kind: %d, want 400", code)
	}

	f := rail.Sim.Faults()
	f.HangRate = 1
	if err := rail.Sim.SetFaults(f); err != nil {
		t.Fatal(err)
	}
	wd := fundingapi.JournalRequest{RequestID: "r-3", AccountID: acct, Kind: "withdrawal", Amount: 200}
	if code, _ := post(wd); code != http.StatusServiceUnavailable {
		t.Fatalf("answer lost: %d, want 503", code)
	}
	f.HangRate = 0
	if err := rail.Sim.SetFaults(f); err != nil {
		t.Fatal(err)
	}
	if code, m := post(wd); code != http.StatusOK || m.BrokerID == "" || m.Direction != "debit" {
		t.Fatalf("resubmitted: %d %+v", code, m)
	}
	if got := rail.BrokerCash(acct); got != 1000 {
		t.Fatalf("broker cash %d, want 1000: one deposit, one withdrawal", got)
	}
	res, err := http.Get(api.URL + "/v1/funding/movements/" + first.Key)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("movement by key: %d", res.StatusCode)
	}
}
