package brokersim

import (
	"testing"
	"time"
)

func achDeposit(h *harness, acct, amount string) map[string]any {
	h.t.Helper()
	var tr map[string]any
	h.must(200, h.do("POST", "/v1/accounts/"+acct+"/transfers", map[string]any{"transfer_type": "ach", "direction": "INCOMING",
		"amount": amount, "relationship_id": "rel-1"}, nil, &tr))
	return tr
}

func TestACHTransferIsReturnedAfterComplete(t *testing.T) {
	h := newHarness(t, Config{SettlementDelay: time.Second})
	acct := h.account()
	funding := h.open("/v2/events/funding/status?since_id=00000000000000000000000000")
	h.setFaults(map[string]string{"return-rate": "1", "return-delay": "1h"})
	tr := achDeposit(h, acct, "100.00")
	if tr["status"] != TransferQueued || tr["type"] != "ach" || tr["direction"] != "INCOMING" {
		t.Fatalf("created %v", tr)
	}
	h.clock.Advance(time.Second)
	funding.events(2) // "" → QUEUED → SENT_TO_CLEARING
	h.clock.Advance(time.Second)
	ev := funding.events(1)[0]
	if ev["status_to"] != TransferComplete || ev["entity_type"] != "Transfer" || ev["entity_id"] != tr["id"] {
		t.Fatalf("event %v, want the transfer COMPLETE", ev)
	}
	cash := func() string {
		var ta map[string]any
		h.must(200, h.do("GET", "/v1/trading/accounts/"+acct+"/account", nil, nil, &ta))
		return ta["cash"].(string)
	}
	if c := cash(); c != "100.00" {
		t.Fatalf("cash %s after COMPLETE", c)
	}
	h.clock.Advance(time.Hour)
	ev = funding.events(1)[0]
	if ev["status_from"] != TransferComplete || ev["status_to"] != TransferReturned || ev["reason"] == nil {
		t.Fatalf("event %v, want COMPLETE → RETURNED with a reason", ev)
	}
	var list []map[string]any
	h.must(200, h.do("GET", "/v1/accounts/"+acct+"/transfers", nil, nil, &list))
	if len(list) != 1 || list[0]["status"] != TransferReturned {
		t.Fatalf("list %v", list)
	}
	if c := cash(); c != "0.00" {
		t.Fatalf("cash %s after the return, want 0.00", c)
	}
}

func TestAdminReturnAndNoGetByID(t *testing.T) {
	h := newHarness(t, Config{SettlementDelay: time.Second})
	acct := h.account()
	tr := achDeposit(h, acct, "10.00")
	h.must(400, h.do("POST", "/__admin/transfers/"+tr["id"].(string)+"/return", map[string]string{}, nil, nil))
	h.clock.Advance(2 * time.Second)
	eventually(t, "COMPLETE", func() bool {
		var list []map[string]any
		h.must(200, h.do("GET", "/v1/accounts/"+acct+"/transfers", nil, nil, &list))
		return list[0]["status"] == TransferComplete
	})
	h.must(200, h.do("POST", "/__admin/transfers/"+tr["id"].(string)+"/return", map[string]string{"reason": "R02"}, nil, nil))
	h.must(404, h.do("GET", "/v1/accounts/"+acct+"/transfers/"+tr["id"].(string), nil, nil, nil))
}

func TestOutgoingWiresAreListedPerAccount(t *testing.T) {
	h := newHarness(t, Config{})
	acct := h.account()
	h.journal(acct, "500.00", "")
	h.must(422, h.do("POST", "/v1/accounts/"+acct+"/transfers", map[string]any{"transfer_type": "wire", "direction": "INCOMING",
		"amount": "1", "bank_id": "b"}, nil, nil))
	h.must(403, h.do("POST", "/v1/accounts/"+acct+"/transfers", map[string]any{"transfer_type": "wire", "direction": "OUTGOING",
		"amount": "501", "bank_id": "b"}, nil, nil))
	var w map[string]any
	h.must(200, h.do("POST", "/v1/accounts/"+acct+"/transfers", map[string]any{"transfer_type": "wire", "direction": "OUTGOING",
		"amount": "200", "bank_id": "bank-1"}, nil, &w))
	achDeposit(h, acct, "1.00")
	var list []map[string]any
	h.must(200, h.do("GET", "/v1/accounts/"+acct+"/transfers?direction=OUTGOING", nil, nil, &list))
	if len(list) != 1 || list[0]["id"] != w["id"] || list[0]["type"] != "wire" {
		t.Fatalf("outgoing list %v", list)
	}
}

func TestFundingWalletTransfersEmitNoEvents(t *testing.T) {
	h := newHarness(t, Config{SettlementDelay: time.Second})
	acct := h.account()
	var wt map[string]any
	h.must(200, h.do("POST", "/v1beta/demo/banking/funding", map[string]any{"account_id": acct, "amount": "80.00"}, nil, &wt))
	if wt["status"] != WalletPending || wt["direction"] != "incoming" {
		t.Fatalf("created %v", wt)
	}
	h.clock.Advance(2 * time.Second)
	path := "/v1beta/accounts/" + acct + "/funding_wallet/transfers/" + wt["id"].(string)
	eventually(t, "the wallet transfer completes", func() bool {
		var got map[string]any
		h.must(200, h.do("GET", path, nil, nil, &got))
		return got["status"] == WalletComplete
	})
	var out map[string]any
	h.must(200, h.do("POST", "/v1beta/accounts/"+acct+"/funding_wallet/withdrawal", map[string]any{"amount": "30.00"}, nil, &out))
	var list []map[string]any
	h.must(200, h.do("GET", "/v1beta/accounts/"+acct+"/funding_wallet/transfers", nil, nil, &list))
	if len(list) != 2 || list[0]["direction"] != "outgoing" {
		t.Fatalf("list %v", list)
	}
	h.srv.mu.Lock()
	n := len(h.srv.st.FundingLog) + len(h.srv.st.ActivityLog) + len(h.srv.st.JournalLog)
	h.srv.mu.Unlock()
	if n != 0 {
		t.Fatalf("funding-wallet transfers published %d events, want none", n)
	}
	var ta map[string]any
	h.must(200, h.do("GET", "/v1/trading/accounts/"+acct+"/account", nil, nil, &ta))
	if ta["cash"] != "50.00" {
		t.Fatalf("cash %v, want 50.00", ta["cash"])
	}
}
