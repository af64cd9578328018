package brokersim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

const (
	snapshotFile    = "state.json"
	snapshotVersion = 1
)

// Account is a brokerage account. The firm account is the correspondent's
// own, the other side of every cash journal.
type Account struct {
	ID            string          `json:"id"`
	AccountNumber string          `json:"account_number"`
	Status        string          `json:"status"`
	Currency      string          `json:"currency"`
	CreatedAt     time.Time       `json:"created_at"`
	Firm          bool            `json:"firm"`
	Cash          int64           `json:"cash"` // cents
	Contact       json.RawMessage `json:"contact,omitempty"`
	Identity      json.RawMessage `json:"identity,omitempty"`
}

// Journal is a cash journal (JNLC).
type Journal struct {
	ID             string    `json:"id"`
	EntryType      string    `json:"entry_type"`
	FromAccount    string    `json:"from_account"`
	ToAccount      string    `json:"to_account"`
	Status         string    `json:"status"`
	Amount         int64     `json:"amount"` // cents
	Description    string    `json:"description"`
	Currency       string    `json:"currency"`
	CreatedAt      time.Time `json:"created_at"`
	ExecutedAt     time.Time `json:"executed_at"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	// Activities are the ref_ids of its JNLC activities by account, once
	// executed; a correcting journal's activities name them as previous_id.
	Activities map[string]string `json:"activities,omitempty"`
	// Corrects and CorrectedBy link a correction to the journal it replaced.
	// Alpaca documents no such field on a journal; the link is visible to
	// clients only through the activities' previous_id.
	Corrects    string `json:"corrects,omitempty"`
	CorrectedBy string `json:"corrected_by,omitempty"`
}

// Transfer is an ACH or wire transfer.
type Transfer struct {
	ID                    string        `json:"id"`
	AccountID             string        `json:"account_id"`
	Type                  string        `json:"type"` // ach | wire
	Direction             string        `json:"direction"`
	Status                string        `json:"status"`
	Amount                int64         `json:"amount"`
	RelationshipID        string        `json:"relationship_id,omitempty"`
	BankID                string        `json:"bank_id,omitempty"`
	FeePaymentMethod      string        `json:"fee_payment_method,omitempty"`
	AdditionalInformation string        `json:"additional_information,omitempty"`
	Reason                string        `json:"reason,omitempty"`
	CreatedAt             time.Time     `json:"created_at"`
	UpdatedAt             time.Time     `json:"updated_at"`
	Step                  time.Duration `json:"step"` // settlement delay per step
	ActivityRef           string        `json:"activity_ref,omitempty"`
}

// WalletTransfer is a funding-wallet transfer (v1beta). It emits no events.
type WalletTransfer struct {
	ID          string    `json:"id"`
	AccountID   string    `json:"account_id"`
	Direction   string    `json:"direction"` // incoming | outgoing
	Status      string    `json:"status"`
	Amount      int64     `json:"amount"`
	PaymentType string    `json:"payment_type"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// Event is one message of an SSE stream as stored: its ULID, its time (the
// business time for activities), the accounts whose order it must keep and
// the JSON sent.
type Event struct {
	ID       string          `json:"id"`
	At       time.Time       `json:"at"`
	Accounts []string        `json:"accounts"`
	Data     json.RawMessage `json:"data"`
}

// job is a scheduled change: a settlement step, a return or a correction.
type job struct {
	Due  time.Time `json:"due"`
	Kind string    `json:"kind"`
	ID   string    `json:"id"`
}

const (
	jobJournalExecute  = "journal.execute"
	jobJournalCorrect  = "journal.correct"
	jobTransferAdvance = "transfer.advance"
	jobTransferReturn  = "transfer.return"
	jobWalletAdvance   = "wallet.advance"
)

type idemRecord struct {
	Fingerprint string `json:"fingerprint"`
	JournalID   string `json:"journal_id"`
}

// state is everything the simulator knows; it is snapshotted whole.
type state struct {
	Version     int                   `json:"version"`
	FirmAccount string                `json:"firm_account"`
	Accounts    []*Account            `json:"accounts"`
	Journals    []*Journal            `json:"journals"`
	Transfers   []*Transfer           `json:"transfers"`
	Wallet      []*WalletTransfer     `json:"wallet_transfers"`
	Idempotency map[string]idemRecord `json:"idempotency"`
	JournalLog  []Event               `json:"journal_events"`
	FundingLog  []Event               `json:"funding_events"`
	ActivityLog []Event               `json:"activity_events"`
	Jobs        []job                 `json:"jobs"`
	LastULID    string                `json:"last_ulid"`
	Dice        [][]byte              `json:"dice"`

	accounts  map[string]*Account
	journals  map[string]*Journal
	transfers map[string]*Transfer
	wallet    map[string]*WalletTransfer
}

func newState() *state {
	st := &state{Version: snapshotVersion, Idempotency: map[string]idemRecord{}}
	st.index()
	return st
}

func (st *state) index() {
	if st.Idempotency == nil {
		st.Idempotency = map[string]idemRecord{}
	}
	st.accounts = make(map[string]*Account, len(st.Accounts))
	for _, a := range st.Accounts {
		st.accounts[a.ID] = a
	}
	st.journals = make(map[string]*Journal, len(st.Journals))
	for _, j := range st.Journals {
		st.journals[j.ID] = j
	}
	st.transfers = make(map[string]*Transfer, len(st.Transfers))
	for _, t := range st.Transfers {
		st.transfers[t.ID] = t
	}
	st.wallet = make(map[string]*WalletTransfer, len(st.Wallet))
	for _, t := range st.Wallet {
		st.wallet[t.ID] = t
	}
}

// encode serialises the state; called with the server's lock held, so the
// bytes are a consistent copy.
func (st *state) encode() ([]byte, error) {
	b, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("brokersim: encoding snapshot: %w", err)
	}
	return b, nil
}

func loadState(dir string) (*state, error) {
	path := filepath.Join(dir, snapshotFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return newState(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("brokersim: reading snapshot %s: %w", path, err)
	}
	st := &state{}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("brokersim: parsing snapshot %s: %w", path, err)
	}
	if st.Version != snapshotVersion {
		return nil, fmt.Errorf("brokersim: snapshot %s has version %d, want %d", path, st.Version, snapshotVersion)
	}
	st.index()
	return st, nil
}

// writeSnapshot replaces dir/state.json atomically (temporary file, fsync,
// rename, directory fsync): a crash leaves the old or the new snapshot,
// never a torn one.
func writeSnapshot(dir string, b []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("brokersim: creating data dir %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, snapshotFile+".*.tmp")
	if err != nil {
		return fmt.Errorf("brokersim: creating snapshot in %s: %w", dir, err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("brokersim: writing snapshot %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("brokersim: syncing snapshot %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("brokersim: closing snapshot %s: %w", tmp.Name(), err)
	}
	final := filepath.Join(dir, snapshotFile)
	if err := os.Rename(tmp.Name(), final); err != nil {
		return fmt.Errorf("brokersim: renaming snapshot to %s: %w", final, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // not every filesystem syncs a directory
		d.Close()
	}
	return nil
}
