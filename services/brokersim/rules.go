package brokersim

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
)

// Journal statuses, lowercase as Alpaca spells them.
const (
	JournalQueued          = "queued"
	JournalSentToClearing  = "sent_to_clearing"
	JournalPending         = "pending"
	JournalExecuted        = "executed"
	JournalActivityCreated = "activity_created"
	JournalRejected        = "rejected"
	JournalCanceled        = "canceled"
	JournalRefused         = "refused"
	JournalDeleted         = "deleted"
	JournalCorrect         = "correct"
)

// Transfer statuses, upper-case as Alpaca spells them. There is no FAILED:
// a bank's refusal after COMPLETE is RETURNED.
const (
	TransferQueued          = "QUEUED"
	TransferApprovalPending = "APPROVAL_PENDING"
	TransferPending         = "PENDING"
	TransferSentToClearing  = "SENT_TO_CLEARING"
	TransferRejected        = "REJECTED"
	TransferCanceled        = "CANCELED"
	TransferApproved        = "APPROVED"
	TransferComplete        = "COMPLETE"
	TransferReturned        = "RETURNED"
)

// Funding-wallet transfer statuses (the v1beta spec's enum).
const (
	WalletPending  = "PENDING"
	WalletExecuted = "EXECUTED"
	WalletComplete = "COMPLETE"
	WalletFailed   = "FAILED"
	WalletCanceled = "CANCELED"
)

// journalMoves lists the transitions the simulator makes. "" is "not yet
// created". executed is deliberately not terminal: a correction moves it to
// correct.
var journalMoves = map[string][]string{
	"":                     {JournalQueued, JournalPending, JournalExecuted},
	JournalQueued:          {JournalSentToClearing, JournalExecuted, JournalRejected, JournalCanceled, JournalRefused},
	JournalPending:         {JournalExecuted, JournalCanceled, JournalRejected},
	JournalSentToClearing:  {JournalExecuted, JournalRejected},
	JournalExecuted:        {JournalActivityCreated, JournalCorrect},
	JournalActivityCreated: {JournalCorrect},
}

// transferMoves is the same for ACH and wire transfers. COMPLETE is not
// terminal: an ACH return comes after it.
var transferMoves = map[string][]string{
	"":                      {TransferQueued},
	TransferQueued:          {TransferApprovalPending, TransferPending, TransferSentToClearing, TransferRejected, TransferCanceled},
	TransferApprovalPending: {TransferApproved, TransferRejected, TransferCanceled},
	TransferApproved:        {TransferSentToClearing},
	TransferPending:         {TransferSentToClearing, TransferRejected},
	TransferSentToClearing:  {TransferComplete, TransferRejected},
	TransferComplete:        {TransferReturned},
}

var walletMoves = map[string][]string{
	"":             {WalletPending},
	WalletPending:  {WalletExecuted, WalletFailed, WalletCanceled},
	WalletExecuted: {WalletComplete, WalletFailed},
}

func allowed(moves map[string][]string, kind, from, to string) error {
	for _, t := range moves[from] {
		if t == to {
			return nil
		}
	}
	return fmt.Errorf("%s cannot move from %q to %q", kind, from, to)
}

// JournalTransition reports whether a journal may move from one status to
// another.
func JournalTransition(from, to string) error { return allowed(journalMoves, "journal", from, to) }

// TransferTransition reports whether an ACH or wire transfer may move from
// one status to another.
func TransferTransition(from, to string) error {
	return allowed(transferMoves, "transfer", from, to)
}

// WalletTransition reports whether a funding-wallet transfer may move from
// one status to another.
func WalletTransition(from, to string) error {
	return allowed(walletMoves, "funding wallet transfer", from, to)
}

// RequestFingerprint is what an Idempotency-Key is compared on: the request
// body as JSON with keys sorted and insignificant whitespace removed, so the
// same request written differently is still the same request. A body that is
// not JSON is compared byte for byte.
func RequestFingerprint(body []byte) string {
	var v any
	canon := body
	if err := json.Unmarshal(body, &v); err == nil {
		if b, err := json.Marshal(v); err == nil { // encoding/json sorts map keys
			canon = b
		}
	}
	sum := sha256.Sum256(bytes.TrimSpace(canon))
	return hex.EncodeToString(sum[:])
}

// IdempotencyOutcome is what a request with an Idempotency-Key gets.
type IdempotencyOutcome int

const (
	// IdemExecute: the key is new; execute and remember.
	IdemExecute IdempotencyOutcome = iota
	// IdemReplay: same key, same body; answer with the original journal.
	IdemReplay
	// IdemConflict: same key, other body; 422.
	IdemConflict
)

// DecideIdempotency compares a request with what its key remembers
// (seenFingerprint is "" when the key is new).
func DecideIdempotency(seenFingerprint, fingerprint string) IdempotencyOutcome {
	switch {
	case seenFingerprint == "":
		return IdemExecute
	case seenFingerprint == fingerprint:
		return IdemReplay
	default:
		return IdemConflict
	}
}

// Cursor is a parsed SSE query: an id range (since_id/until_id, ULIDs) or a
// time range (since/until), never both. since_id is exclusive (the events
// after the one named), until_id is exclusive too; since is inclusive and
// until exclusive, so adjacent windows neither overlap nor leave a gap.
type Cursor struct {
	SinceID, UntilID string
	Since, Until     time.Time
	// Live is true when no since/since_id was given: the stream starts at
	// "now" and sends only what happens from then on.
	Live bool
}

// Bounded reports whether the stream ends (with 200) at an upper bound.
func (c Cursor) Bounded() bool { return c.UntilID != "" || !c.Until.IsZero() }

// ParseCursor reads since/until/since_id/until_id with the documented rules:
// until needs since, until_id needs since_id, and the time and id families
// are mutually exclusive.
func ParseCursor(get func(string) string) (Cursor, error) {
	var c Cursor
	sinceID, untilID := get("since_id"), get("until_id")
	since, until := get("since"), get("until")
	if (sinceID != "" || untilID != "") && (since != "" || until != "") {
		return c, errors.New("since/until and since_id/until_id are mutually exclusive")
	}
	if untilID != "" && sinceID == "" {
		return c, errors.New("until_id requires since_id")
	}
	if until != "" && since == "" {
		return c, errors.New("until requires since")
	}
	for _, p := range []struct {
		name, v string
		dst     *string
	}{{"since_id", sinceID, &c.SinceID}, {"until_id", untilID, &c.UntilID}} {
		if p.v == "" {
			continue
		}
		id, err := ulid.ParseStrict(p.v)
		if err != nil {
			return c, fmt.Errorf("%s %q is not a ULID", p.name, p.v)
		}
		*p.dst = id.String()
	}
	for _, p := range []struct {
		name, v string
		dst     *time.Time
	}{{"since", since, &c.Since}, {"until", until, &c.Until}} {
		if p.v == "" {
			continue
		}
		t, err := parseTimeParam(p.v)
		if err != nil {
			return c, fmt.Errorf("%s %q: want RFC3339 or YYYY-MM-DD", p.name, p.v)
		}
		*p.dst = t
	}
	if c.UntilID != "" && c.UntilID <= c.SinceID {
		return c, errors.New("until_id must be after since_id")
	}
	if !c.Until.IsZero() && !c.Until.After(c.Since) {
		return c, errors.New("until must be after since")
	}
	c.Live = sinceID == "" && since == ""
	return c, nil
}

// parseTimeParam accepts RFC3339 (with or without fractional seconds) or a
// date, which means midnight UTC. A "+" decoded from an unencoded query
// string arrives as a space; it is read back as "+".
func parseTimeParam(v string) (time.Time, error) {
	v = strings.ReplaceAll(v, " ", "+")
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	return time.Parse(time.DateOnly, v)
}

// Position says where an event stands relative to a cursor.
type Position int

const (
	// Before: not sent (at or before since_id, or before since).
	Before Position = iota
	// Inside: sent.
	Inside
	// After: at or past the upper bound; a bounded stream ends here.
	After
)

// Locate places an event (its ULID and its time) relative to c. A live
// cursor places everything Inside; the caller starts it at the log's end.
func (c Cursor) Locate(id string, at time.Time) Position {
	switch {
	case c.SinceID != "":
		if id <= c.SinceID {
			return Before
		}
		if c.UntilID != "" && id >= c.UntilID {
			return After
		}
	case !c.Since.IsZero():
		if at.Before(c.Since) {
			return Before
		}
		if !c.Until.IsZero() && !at.Before(c.Until) {
			return After
		}
	}
	return Inside
}

// NextULID returns a ULID for time t that sorts after last, so ids handed
// out by one simulator always increase even when the clock stands still or
// goes back. entropy supplies the random part.
func NextULID(last string, t time.Time, entropy func([]byte)) string {
	var id ulid.ULID
	if err := id.SetTime(ulid.Timestamp(t)); err != nil {
		panic(err) // only times after year 10889 overflow
	}
	var e [10]byte
	entropy(e[:])
	_ = id.SetEntropy(e[:])
	if last == "" {
		return id.String()
	}
	prev, err := ulid.ParseStrict(last)
	if err != nil || id.Compare(prev) > 0 {
		return id.String()
	}
	// Same millisecond (or an earlier one): one more than the last id.
	for i := len(prev) - 1; i >= 0; i-- {
		prev[i]++
		if prev[i] != 0 {
			break
		}
	}
	return prev.String()
}

// ParseAmount reads a positive decimal money amount ("100", "12.5",
// "0.01") into cents. More than two decimals, signs, exponents and zero are
// refused.
func ParseAmount(s string) (int64, error) {
	s = strings.TrimSpace(s)
	whole, frac, dot := strings.Cut(s, ".")
	if whole == "" || len(frac) > 2 || (dot && frac == "") || len(whole) > 13 {
		return 0, fmt.Errorf("amount %q is not a decimal with at most two places", s)
	}
	for _, r := range whole + frac {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("amount %q is not a decimal with at most two places", s)
		}
	}
	for len(frac) < 2 {
		frac += "0"
	}
	n, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("amount %q: %w", s, err)
	}
	if n <= 0 {
		return 0, fmt.Errorf("amount %q must be greater than zero", s)
	}
	return n, nil
}

// FormatAmount writes cents as a decimal string with two places.
func FormatAmount(cents int64) string {
	sign := ""
	if cents < 0 {
		sign, cents = "-", -cents
	}
	return fmt.Sprintf("%s%d.%02d", sign, cents/100, cents%100)
}

// RateWindow is a fixed rate-limit window: Limit requests per Length,
// counted from Start.
type RateWindow struct {
	Start time.Time
	Used  int
}

// TakeRate counts one request against the window at now and returns the
// window to keep, whether the request is allowed, the remaining requests and
// the reset time (when the window ends), as the X-RateLimit headers report.
func TakeRate(w RateWindow, limit int, length time.Duration, now time.Time) (next RateWindow, ok bool, remaining int, reset time.Time) {
	if w.Start.IsZero() || !now.Before(w.Start.Add(length)) {
		w = RateWindow{Start: now.Truncate(length)}
	}
	reset = w.Start.Add(length)
	if w.Used >= limit {
		return w, false, 0, reset
	}
	w.Used++
	return w, true, limit - w.Used, reset
}
