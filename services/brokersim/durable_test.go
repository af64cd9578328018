package brokersim

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// crashCopy copies what is on disk in dir now into a new directory: what a
// SIGKILL at this moment would leave behind.
func crashCopy(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, snapshotFile))
	if err != nil {
		t.Fatalf("nothing on disk after an answer: %v", err)
	}
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, snapshotFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestACrashForgetsNothingAnswered(t *testing.T) {
	dir := t.TempDir()
	// Snapshots nobody waits for would come only after an hour: whatever is
	// on disk was written because an answer waited for it.
	h := newHarness(t, Config{DataDir: dir, SnapshotInterval: time.Hour, Seed: 7})
	acct := h.account()
	j := h.journal(acct, "42.00", "crash-key")

	after := crashCopy(t, dir)
	h2 := newHarness(t, Config{DataDir: after, SnapshotInterval: time.Hour, Seed: 7})
	var got map[string]any
	h2.must(200, h2.do("GET", "/v1/journals/"+j["id"].(string), nil, nil, &got))
	if got["status"] != JournalExecuted {
		t.Fatalf("restarted simulator has the journal as %v", got["status"])
	}
	// The key is remembered: a retry after the crash is not a second journal.
	if again := h2.journal(acct, "42.00", "crash-key"); again["id"] != j["id"] {
		t.Fatalf("retry after the crash made journal %v, want %v", again["id"], j["id"])
	}
	// Its random streams went on: no id is handed out twice.
	if other := h2.journal(acct, "1.00", ""); other["id"] == j["id"] {
		t.Fatal("the restarted simulator handed out an id again")
	}
	if h2.srv.FirmAccountID() != h.srv.FirmAccountID() {
		t.Fatal("the firm account changed across the restart")
	}
}

func TestACrashForgetsNoStreamedEvent(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, Config{DataDir: dir, SnapshotInterval: time.Hour, SettlementDelay: time.Second})
	acct := h.account()
	tr := achDeposit(h, acct, "5.00")
	s := h.open("/v2/events/funding/status?since_id=" + zeroULID)
	s.events(1)
	// The scheduler moves the transfer; no API answer waits for it, but the
	// stream does before it tells anyone.
	h.clock.Advance(time.Second)
	ev := s.events(1)[0]
	if ev["status_to"] != TransferSentToClearing {
		t.Fatalf("event %v", ev)
	}
	after := crashCopy(t, dir)
	st, err := loadState(after)
	if err != nil {
		t.Fatal(err)
	}
	if st.transfers[tr["id"].(string)].Status != TransferSentToClearing || len(st.FundingLog) != 2 ||
		st.FundingLog[1].ID != ev["event_id"] {
		t.Fatalf("on disk after the event was streamed: status %s, %d events", st.transfers[tr["id"].(string)].Status, len(st.FundingLog))
	}
}
