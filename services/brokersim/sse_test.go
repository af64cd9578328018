package brokersim

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

const zeroULID = "00000000000000000000000000"

func TestSinceIDResumesWithExactlyTheLaterEvents(t *testing.T) {
	h := newHarness(t, Config{})
	acct := h.account()
	for i := range 6 {
		h.journal(acct, fmt.Sprintf("%d.00", i+1), "")
	}
	all := ids(h.open("/v2/events/journals/status?since_id=" + zeroULID).events(6))
	if !slices.IsSorted(all) {
		t.Fatalf("event ids are not increasing: %v", all)
	}
	// Resume after the third: exactly the fourth onwards, then what happens
	// next.
	resumed := h.open("/v2/events/journals/status?since_id=" + all[2])
	got := ids(resumed.events(3))
	if !slices.Equal(got, all[3:]) {
		t.Fatalf("resumed after %s: got %v, want %v", all[2], got, all[3:])
	}
	j := h.journal(acct, "9.00", "")
	if next := resumed.events(1)[0]; next["journal_id"] != j["id"] {
		t.Fatalf("live event after the replay: %v, want journal %v", next, j["id"])
	}
	// A bounded replay sends exactly (since_id, until_id) and ends.
	bounded := h.open("/v2/events/journals/status?since_id=" + all[1] + "&until_id=" + all[4])
	if got := ids(bounded.rest()); !slices.Equal(got, all[2:4]) {
		t.Fatalf("bounded replay: got %v, want %v", got, all[2:4])
	}
}

func TestNoCursorStreamsOnlyWhatHappensAfterConnecting(t *testing.T) {
	h := newHarness(t, Config{})
	acct := h.account()
	h.journal(acct, "1.00", "")
	live := h.open("/v2/events/journals/status")
	j := h.journal(acct, "2.00", "")
	if ev := live.events(1)[0]; ev["journal_id"] != j["id"] {
		t.Fatalf("live stream sent %v first, want the journal made after connecting (%v)", ev, j["id"])
	}
}

func TestActivitiesBoundedReplayEndsAtUntil(t *testing.T) {
	h := newHarness(t, Config{})
	acct := h.account()
	var refs [3][]string
	for i := range 3 {
		h.journal(acct, "1.00", "")
		h.clock.Advance(time.Hour)
		_ = i
	}
	all := h.open("/v2beta1/events/activities?since_id=" + zeroULID).events(6)
	for i, a := range all {
		refs[i/2] = append(refs[i/2], a["ref_id"].(string))
	}
	since := url.QueryEscape(t0.Add(time.Hour).Format(time.RFC3339))
	until := url.QueryEscape(t0.Add(2 * time.Hour).Format(time.RFC3339))
	got := h.open("/v2beta1/events/activities?since=" + since + "&until=" + until).rest()
	var gotRefs []string
	for _, a := range got {
		gotRefs = append(gotRefs, a["ref_id"].(string))
		if a["at"] != t0.Add(time.Hour).Format(time.RFC3339Nano) {
			t.Errorf("activity at %v outside [since, until)", a["at"])
		}
	}
	if !slices.Equal(gotRefs, refs[1]) {
		t.Fatalf("window replay: %v, want the second journal's activities %v", gotRefs, refs[1])
	}
	// The same window again gives the same activities: heal windows re-run
	// safely.
	again := h.open("/v2beta1/events/activities?since=" + since + "&until=" + until).rest()
	if len(again) != len(got) || again[0]["ref_id"] != got[0]["ref_id"] {
		t.Fatalf("second run of the window differs: %v", again)
	}
}

func TestSSECursorRulesAre400(t *testing.T) {
	h := newHarness(t, Config{})
	for _, q := range []string{"until_id=" + zeroULID, "since_id=x", "until=2026-01-01", "since=2026-01-01&since_id=" + zeroULID} {
		h.must(400, h.do("GET", "/v2/events/funding/status?"+q, nil, nil, nil))
	}
}

func TestSlowReaderIsToldHowManyMessagesItLost(t *testing.T) {
	h := newHarness(t, Config{SSEBuffer: 2})
	acct := h.account()
	h.setFaults(map[string]string{"slow-settlement-rate": "1", "slow-settlement-delay": "1m"})
	for range 5 {
		h.journal(acct, "1.00", "")
	}
	s := h.open("/v2/events/journals/status?since_id=" + zeroULID)
	s.events(5) // the replay is never cut
	h.clock.Advance(time.Minute)
	// Five journals execute at once; the reader may be two behind.
	l := s.next()
	if l.comment != ": you are reading too slowly, dropped 3 messages" {
		t.Fatalf("got %+v, want the slow-reader comment", l)
	}
	if evs := s.events(2); evs[0]["status_to"] != JournalExecuted {
		t.Fatalf("after the comment: %v", evs)
	}
}

func TestReorderKeepsEachAccountsOrder(t *testing.T) {
	h := newHarness(t, Config{SettlementDelay: time.Second})
	a, b := h.account(), h.account()
	// Neighbours of one account and of two, so that a fault that swapped
	// any two neighbours would break one account's order.
	for _, acct := range []string{a, a, b, a, b, b} {
		achDeposit(h, acct, "1.00")
	}
	h.clock.Advance(2 * time.Second)
	eventually(t, "every transfer completes", func() bool {
		h.srv.mu.Lock()
		defer h.srv.mu.Unlock()
		return len(h.srv.st.FundingLog) == 18
	})
	inOrder := ids(h.open("/v2/events/funding/status?since_id=" + zeroULID).events(18))
	h.setFaults(map[string]string{"sse-reorder-rate": "1"})
	got := h.open("/v2/events/funding/status?since_id=" + zeroULID).events(18)
	if slices.Equal(ids(got), inOrder) {
		t.Fatal("reorder fault sent everything in order")
	}
	for _, acct := range []string{a, b} {
		var seen []string
		for _, e := range got {
			if e["account_id"] == acct {
				seen = append(seen, e["event_id"].(string))
			}
		}
		if !slices.IsSorted(seen) {
			t.Fatalf("account %s's events out of order: %v", acct, seen)
		}
	}
}

func TestDropDuplicateAndDisconnectFaults(t *testing.T) {
	h := newHarness(t, Config{})
	acct := h.account()
	for range 3 {
		h.journal(acct, "1.00", "")
	}
	h.setFaults(map[string]string{"sse-duplicate-rate": "1"})
	dup := ids(h.open("/v2/events/journals/status?since_id=" + zeroULID).events(6))
	if dup[0] != dup[1] || dup[2] != dup[3] || dup[1] == dup[2] {
		t.Fatalf("duplicate fault: %v", dup)
	}
	h.setFaults(map[string]string{"sse-duplicate-rate": "0", "sse-drop-rate": "1"})
	h.srv.mu.Lock()
	last := h.srv.st.LastULID
	h.srv.mu.Unlock()
	all := ids(h.open("/v2/events/journals/status?since_id=" + zeroULID + "&until_id=" + last).rest())
	if len(all) != 0 {
		t.Fatalf("drop fault sent %v", all)
	}
	h.setFaults(map[string]string{"sse-drop-rate": "0", "sse-disconnect-rate": "1"})
	if got := h.open("/v2/events/journals/status?since_id=" + zeroULID).rest(); len(got) != 1 {
		t.Fatalf("disconnect fault: %d messages before the stream closed, want 1", len(got))
	}
}

func TestStreamsNeedCredentials(t *testing.T) {
	h := newHarness(t, Config{})
	res, err := h.http.Client().Get(h.http.URL + "/v2/events/journals/status")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 401 || !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Basic") {
		t.Fatalf("status %d", res.StatusCode)
	}
}

func TestJournalStreamReordersAcrossCustomersOnly(t *testing.T) {
	h := newHarness(t, Config{})
	a, b := h.account(), h.account()
	customer := map[string]string{}
	for _, acct := range []string{a, a, b, a, b, b} {
		customer[h.journal(acct, "1.00", "")["id"].(string)] = acct
	}
	inOrder := ids(h.open("/v2/events/journals/status?since_id=" + zeroULID).events(6))
	h.setFaults(map[string]string{"sse-reorder-rate": "1"})
	got := h.open("/v2/events/journals/status?since_id=" + zeroULID).events(6)
	if slices.Equal(ids(got), inOrder) {
		t.Fatal("the firm account on every journal kept the whole stream in order")
	}
	last := map[string]string{}
	for _, e := range got {
		c, id := customer[e["journal_id"].(string)], e["event_id"].(string)
		if id < last[c] {
			t.Fatalf("customer %s's journal events out of order: %v", c, ids(got))
		}
		last[c] = id
	}
}

func TestIdleStreamsGetHeartbeats(t *testing.T) {
	h := newHarness(t, Config{Heartbeat: 10 * time.Millisecond})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", h.http.URL+"/v2/events/funding/status", nil)
	req.SetBasicAuth("CK_TEST", "secret")
	res, err := h.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if sc.Text() == ":heartbeat" {
			return
		}
	}
	t.Fatalf("stream ended without a heartbeat: %v", sc.Err())
}

func TestClosingTheSimulatorSaysSoOnOpenStreams(t *testing.T) {
	h := newHarness(t, Config{})
	s := h.open("/v2/events/journals/status")
	eventually(t, "the stream to be served", func() bool { return h.srv.Stats().Requests == 1 })
	if err := h.srv.Close(); err != nil {
		t.Fatal(err)
	}
	if l := s.next(); l.comment != ": internal server error" {
		t.Fatalf("got %+v, want the closing comment", l)
	}
}
