package providersim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// snapshotFile is the name of the state file inside Config.DataDir.
const snapshotFile = "state.json"

// snapshotVersion is bumped when the file's shape changes incompatibly.
const snapshotVersion = 1

// paymentIntent is the simulator's record of a PaymentIntent and its one
// charge (Stripe keeps refunds on the charge, so AmountRefunded lives here
// while the intent's status stays "succeeded").
type paymentIntent struct {
	Seq                int64             `json:"seq"`
	ID                 string            `json:"id"`
	Amount             int64             `json:"amount"`
	Currency           string            `json:"currency"`
	Status             string            `json:"status"`
	Created            int64             `json:"created"`
	Description        string            `json:"description,omitempty"`
	Metadata           map[string]string `json:"metadata"`
	PaymentMethod      string            `json:"payment_method,omitempty"`
	LastPaymentError   *apiError         `json:"last_payment_error,omitempty"`
	ChargeID           string            `json:"charge_id,omitempty"`
	ChargeCreated      int64             `json:"charge_created,omitempty"`
	AmountRefunded     int64             `json:"amount_refunded,omitempty"`
	CanceledAt         int64             `json:"canceled_at,omitempty"`
	CancellationReason string            `json:"cancellation_reason,omitempty"`
	ClientSecret       string            `json:"client_secret"`
	// CaptureMethod is "manual" for an authorization hold; empty is
	// Stripe's default, automatic_async.
	CaptureMethod string `json:"capture_method,omitempty"`
	// AmountCaptured is what a hold's capture took (at most Amount; the
	// rest was released). Zero until captured; for automatically captured
	// payments the whole Amount is received.
	AmountCaptured int64 `json:"amount_captured,omitempty"`
}

// manual reports whether the intent authorizes a hold instead of charging.
func (pi *paymentIntent) manual() bool { return pi.CaptureMethod == captureManual }

// received is what the payment took from the card: the captured part of
// a hold, or the whole amount of an automatic payment, once succeeded.
func (pi *paymentIntent) received() int64 {
	if pi.Status != StatusSucceeded {
		return 0
	}
	if pi.manual() && pi.AmountCaptured > 0 {
		return pi.AmountCaptured
	}
	return pi.Amount
}

// released is the part of an authorization given back without being
// captured: the rest after a partial capture, or all of it when the hold
// was canceled or expired. Stripe shows it in the charge's amount_refunded.
func (pi *paymentIntent) released() int64 {
	if !pi.manual() || pi.ChargeID == "" {
		return 0
	}
	switch pi.Status {
	case StatusSucceeded:
		return pi.Amount - pi.received()
	case StatusCanceled:
		return pi.Amount
	}
	return 0
}

type refund struct {
	Seq           int64             `json:"seq"`
	ID            string            `json:"id"`
	Amount        int64             `json:"amount"`
	Currency      string            `json:"currency"`
	PaymentIntent string            `json:"payment_intent"`
	Charge        string            `json:"charge"`
	Status        string            `json:"status"`
	Reason        string            `json:"reason,omitempty"`
	Created       int64             `json:"created"`
	Metadata      map[string]string `json:"metadata"`
}

// event is a Stripe Event as stored: the object is a rendered snapshot taken
// when the state changed.
type event struct {
	Seq        int64           `json:"seq"`
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Created    int64           `json:"created"`
	APIVersion string          `json:"api_version"`
	Object     json.RawMessage `json:"object"`
	Previous   map[string]any  `json:"previous_attributes,omitempty"`
	RequestID  string          `json:"request_id,omitempty"`
	IdemKey    string          `json:"idempotency_key,omitempty"`
	Endpoints  int             `json:"endpoints"`
}

// idemRecord is the first answer given to an (API key, Idempotency-Key) pair.
type idemRecord struct {
	Fingerprint string    `json:"fingerprint"`
	Status      int       `json:"status"`
	Body        []byte    `json:"body"`
	Created     time.Time `json:"created"`
}

// Kinds of scheduled transitions.
const (
	jobResolveProcessing = "resolve_processing"
	jobLateReversal      = "late_reversal"
	jobHoldExpiry        = "hold_expiry"
)

// job is a transition the provider makes by itself at a later time.
type job struct {
	At     time.Time `json:"at"`
	Kind   string    `json:"kind"`
	Object string    `json:"object"`
}

// state is everything the simulator remembers; it is what a snapshot holds.
type state struct {
	Version        int                       `json:"version"`
	Seq            int64                     `json:"seq"`
	PaymentIntents []*paymentIntent          `json:"payment_intents"` // ascending Seq
	Refunds        []*refund                 `json:"refunds"`         // ascending Seq
	Events         []*event                  `json:"events"`          // ascending Seq
	Idempotency    map[string]*idemRecord    `json:"idempotency"`     // by api key + "\x00" + key
	Jobs           []job                     `json:"jobs"`
	Dice           [][]byte                  `json:"dice,omitempty"` // random stream positions, written at snapshot time
	piByID         map[string]*paymentIntent `json:"-"`
	refundByID     map[string]*refund        `json:"-"`
	eventByID      map[string]*event         `json:"-"`
}

func newState() *state {
	s := &state{Version: snapshotVersion, Idempotency: make(map[string]*idemRecord)}
	s.index()
	return s
}

func (s *state) index() {
	s.piByID = make(map[string]*paymentIntent, len(s.PaymentIntents))
	for _, pi := range s.PaymentIntents {
		s.piByID[pi.ID] = pi
	}
	s.refundByID = make(map[string]*refund, len(s.Refunds))
	for _, r := range s.Refunds {
		s.refundByID[r.ID] = r
	}
	s.eventByID = make(map[string]*event, len(s.Events))
	for _, e := range s.Events {
		s.eventByID[e.ID] = e
	}
	if s.Idempotency == nil {
		s.Idempotency = make(map[string]*idemRecord)
	}
}

func (s *state) nextSeq() int64 {
	s.Seq++
	return s.Seq
}

// loadState reads dir/state.json. A missing file is an empty state; a file
// that cannot be parsed is an error (the simulator refuses to start rather
// than silently forget payments).
func loadState(dir string) (*state, error) {
	path := filepath.Join(dir, snapshotFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return newState(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("providersim: reading snapshot %s: %w", path, err)
	}
	st := &state{}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("providersim: parsing snapshot %s: %w", path, err)
	}
	if st.Version != snapshotVersion {
		return nil, fmt.Errorf("providersim: snapshot %s has version %d, want %d", path, st.Version, snapshotVersion)
	}
	st.index()
	return st, nil
}

// writeSnapshot replaces dir/state.json atomically: it writes a temporary
// file in the same directory, syncs it, renames it over the old one and
// syncs the directory. A crash leaves either the old or the new snapshot,
// never a torn one.
// writeSnapshotFile is how snapshots are written; a test holds one in
// flight through it.
var writeSnapshotFile = writeSnapshot

func writeSnapshot(dir string, b []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("providersim: creating data dir %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, snapshotFile+".*.tmp")
	if err != nil {
		return fmt.Errorf("providersim: creating snapshot in %s: %w", dir, err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("providersim: writing snapshot %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("providersim: syncing snapshot %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("providersim: closing snapshot %s: %w", tmp.Name(), err)
	}
	final := filepath.Join(dir, snapshotFile)
	if err := os.Rename(tmp.Name(), final); err != nil {
		return fmt.Errorf("providersim: renaming snapshot to %s: %w", final, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // best effort: not every filesystem supports syncing a directory
		d.Close()
	}
	return nil
}

// clone copies what a snapshot needs so that it can be encoded without
// holding the server's lock: payment intents by value (they change in
// place), everything else by reference (refunds, events and idempotency
// records never change once made; the slices and map are copied).
func (st *state) clone() *state {
	c := &state{Version: st.Version, Seq: st.Seq, Refunds: slices.Clone(st.Refunds), Events: slices.Clone(st.Events),
		Idempotency: maps.Clone(st.Idempotency), Jobs: slices.Clone(st.Jobs), Dice: st.Dice}
	c.PaymentIntents = make([]*paymentIntent, len(st.PaymentIntents))
	for i, pi := range st.PaymentIntents {
		cp := *pi
		c.PaymentIntents[i] = &cp
	}
	return c
}

func marshalState(st *state) ([]byte, error) {
	b, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("providersim: encoding snapshot: %w", err)
	}
	return b, nil
}
