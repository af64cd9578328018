package brokersim

import (
	"net/url"
	"testing"
	"time"
)

func TestJournalTransitions(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		ok       bool
	}{
		{"", JournalExecuted, true},
		{"", JournalQueued, true},
		{JournalQueued, JournalExecuted, true},
		{JournalExecuted, JournalCorrect, true}, // executed is not final
		{JournalCorrect, JournalExecuted, false},
		{JournalCanceled, JournalExecuted, false},
		{JournalRefused, JournalExecuted, false},
		{JournalExecuted, JournalQueued, false},
		{"", "EXECUTED", false}, // journal statuses are lowercase
	} {
		if err := JournalTransition(tc.from, tc.to); (err == nil) != tc.ok {
			t.Errorf("%q → %q: err %v, want ok=%v", tc.from, tc.to, err, tc.ok)
		}
	}
}

func TestTransferTransitions(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		ok       bool
	}{
		{"", TransferQueued, true},
		{TransferQueued, TransferSentToClearing, true},
		{TransferSentToClearing, TransferComplete, true},
		{TransferComplete, TransferReturned, true}, // the bank returns after COMPLETE
		{TransferReturned, TransferComplete, false},
		{TransferSentToClearing, TransferReturned, false},
		{TransferSentToClearing, "FAILED", false}, // there is no FAILED
		{TransferQueued, "sent_to_clearing", false},
	} {
		if err := TransferTransition(tc.from, tc.to); (err == nil) != tc.ok {
			t.Errorf("%q → %q: err %v, want ok=%v", tc.from, tc.to, err, tc.ok)
		}
	}
}

func TestIdempotencyDecision(t *testing.T) {
	a := RequestFingerprint([]byte(`{"entry_type":"JNLC","amount":"10","to_account":"x"}`))
	same := RequestFingerprint([]byte(" {\n \"to_account\": \"x\", \"amount\": \"10\",\"entry_type\":\"JNLC\"}\n"))
	other := RequestFingerprint([]byte(`{"entry_type":"JNLC","amount":"11","to_account":"x"}`))
	if a != same {
		t.Fatal("the same request with other key order and spacing has another fingerprint")
	}
	for _, tc := range []struct {
		name      string
		seen, now string
		want      IdempotencyOutcome
	}{
		{"new key", "", a, IdemExecute},
		{"same body", a, same, IdemReplay},
		{"other body", a, other, IdemConflict},
	} {
		if got := DecideIdempotency(tc.seen, tc.now); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestParseCursor(t *testing.T) {
	const id1, id2 = "01KJQ4Z0000000000000000001", "01KJQ4Z0000000000000000009"
	for _, tc := range []struct {
		query   string
		ok      bool
		live    bool
		bounded bool
	}{
		{"", true, true, false},
		{"since_id=" + id1, true, false, false},
		{"since_id=" + id1 + "&until_id=" + id2, true, false, true},
		{"until_id=" + id2, false, false, false},                      // until_id needs since_id
		{"since_id=" + id2 + "&until_id=" + id1, false, false, false}, // empty range
		{"since_id=42", false, false, false},                          // not a ULID
		{"since=2026-03-01&since_id=" + id1, false, false, false},     // families exclusive
		{"until=2026-03-02", false, false, false},                     // until needs since
		{"since=2026-03-01&until=2026-03-02", true, false, true},      // dates
		{"since=2026-03-01T10:00:00+02:00", true, false, false},       // RFC3339, + decoded as space
		{"since=2026-03-01T10:00:00%2B02:00&until=2026-03-01T11:00:00Z", true, false, true},
		{"since=yesterday", false, false, false},
	} {
		q, err := url.ParseQuery(tc.query)
		if err != nil {
			t.Fatal(err)
		}
		c, err := ParseCursor(q.Get)
		if (err == nil) != tc.ok {
			t.Errorf("%q: err %v, want ok=%v", tc.query, err, tc.ok)
			continue
		}
		if err == nil && (c.Live != tc.live || c.Bounded() != tc.bounded) {
			t.Errorf("%q: live %v bounded %v, want %v %v", tc.query, c.Live, c.Bounded(), tc.live, tc.bounded)
		}
	}
}

func TestCursorLocate(t *testing.T) {
	const a, b, c, d = "01KJQ4Z0000000000000000001", "01KJQ4Z0000000000000000002", "01KJQ4Z0000000000000000003", "01KJQ4Z0000000000000000004"
	at := func(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }
	for _, tc := range []struct {
		name string
		cur  Cursor
		id   string
		at   time.Time
		want Position
	}{
		{"since_id is exclusive", Cursor{SinceID: b}, b, at(0), Before},
		{"after since_id", Cursor{SinceID: b}, c, at(0), Inside},
		{"before since_id", Cursor{SinceID: b}, a, at(0), Before},
		{"until_id is exclusive", Cursor{SinceID: a, UntilID: c}, c, at(0), After},
		{"inside the id range", Cursor{SinceID: a, UntilID: c}, b, at(0), Inside},
		{"past until_id", Cursor{SinceID: a, UntilID: c}, d, at(0), After},
		{"since is inclusive", Cursor{Since: at(1)}, a, at(1), Inside},
		{"before since", Cursor{Since: at(1)}, d, at(0), Before},
		{"until is exclusive", Cursor{Since: at(1), Until: at(2)}, a, at(2), After},
		{"time range ignores ids", Cursor{Since: at(1), Until: at(3)}, a, at(2), Inside},
		{"live", Cursor{Live: true}, a, at(0), Inside},
	} {
		if got := tc.cur.Locate(tc.id, tc.at); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestNextULIDAlwaysIncreases(t *testing.T) {
	zero := func(b []byte) { clear(b) }
	high := func(b []byte) {
		for i := range b {
			b[i] = 0xff
		}
	}
	first := NextULID("", t0, high)
	for _, tc := range []struct {
		name    string
		at      time.Time
		entropy func([]byte)
	}{
		{"same millisecond, smaller entropy", t0, zero},
		{"clock went back", t0.Add(-time.Hour), high},
		{"later", t0.Add(time.Millisecond), zero},
	} {
		next := NextULID(first, tc.at, tc.entropy)
		if next <= first {
			t.Errorf("%s: %s is not after %s", tc.name, next, first)
		}
		first = next
	}
}

func TestAmounts(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"100", 10000, true}, {"12.5", 1250, true}, {"0.01", 1, true}, {" 7.25 ", 725, true},
		{"0", 0, false}, {"-5", 0, false}, {"1.234", 0, false}, {"1e3", 0, false}, {"", 0, false}, {"5.", 0, false}, {".5", 0, false},
	} {
		got, err := ParseAmount(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseAmount(%q) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	for cents, want := range map[int64]string{1: "0.01", 1250: "12.50", -725: "-7.25", 0: "0.00"} {
		if got := FormatAmount(cents); got != want {
			t.Errorf("FormatAmount(%d) = %q, want %q", cents, got, want)
		}
	}
}

func TestRateWindow(t *testing.T) {
	var w RateWindow
	var ok bool
	var remaining int
	var reset time.Time
	now := t0.Add(10 * time.Second)
	for i, want := range []struct {
		ok        bool
		remaining int
	}{{true, 1}, {true, 0}, {false, 0}} {
		w, ok, remaining, reset = TakeRate(w, 2, time.Minute, now)
		if ok != want.ok || remaining != want.remaining || !reset.Equal(t0.Add(time.Minute)) {
			t.Fatalf("request %d: ok %v remaining %d reset %v", i+1, ok, remaining, reset)
		}
	}
	if _, ok, remaining, _ = TakeRate(w, 2, time.Minute, t0.Add(time.Minute)); !ok || remaining != 1 {
		t.Fatalf("a new window did not reset the count: ok %v remaining %d", ok, remaining)
	}
}
