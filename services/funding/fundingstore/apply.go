package fundingstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/funding"
)

// News is one report of a broker record's status, from an answer, a
// stream message or a poll.
type News struct {
	Domain       funding.Domain
	BrokerID     string
	BrokerStatus string
	// IntentKey links the record to its intent when the broker's id is not
	// stored yet (a journal event carries its Idempotency-Key).
	IntentKey string
	// Details describe a record the service has not seen (a corrected
	// journal's replacement): account, direction, amount, currency.
	Details *Movement
	// Source says where the news came from, for the review queue.
	Source string
}

// Result is what one piece of news did.
type Result struct {
	// Review: the news went to the review queue (unknown status, or a
	// record the service cannot place); nothing else changed.
	Review bool
	// Changed: the record moved to Status.
	Changed bool
	Status  funding.Status
	Effect  funding.Effect
}

// Report applies one piece of news in its own transaction (a broker's
// answer, a poll).
func (s *Store) Report(ctx context.Context, n News) (Result, error) {
	var res Result
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		var err error
		res, err = s.apply(ctx, tx, n)
		return err
	})
	return res, err
}

// Apply applies one piece of news inside tx, a transaction the caller
// owns (a consumer's, for the reconciler's repair commands): the same
// status-guarded upsert the stream intake and the pollers use.
func (s *Store) Apply(ctx context.Context, tx pgx.Tx, n News) (Result, error) {
	return s.apply(ctx, tx, n)
}

// Intake is one stream message as received.
type Intake struct {
	Stream string
	// DedupeKey is the stream's documented dedupe key: event_id for the
	// status streams, ref_id for activities.
	DedupeKey string
	// EventID is the message's cursor position (a ULID).
	EventID string
	Payload []byte
}

// Take takes one stream message in: in one transaction it records the
// message in the seen set, applies its news when the message is new, and
// moves the stream's cursor. A message seen before — applied, unchanged or
// sent to review alike — applies nothing (fresh=false). The cursor only
// moves forward, so a message delivered late does not pull it back.
func (s *Store) Take(ctx context.Context, in Intake, news ...News) (fresh bool, res []Result, err error) {
	err = pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		res = res[:0]
		tag, err := tx.Exec(ctx, `insert into funding_stream_intake (stream, dedupe_key, event_id, payload) values ($1, $2, $3, $4)
			on conflict (stream, dedupe_key) do nothing`, in.Stream, in.DedupeKey, in.EventID, in.Payload)
		if err != nil {
			return err
		}
		fresh = tag.RowsAffected() == 1
		if fresh {
			for _, n := range news {
				r, err := s.apply(ctx, tx, n)
				if err != nil {
					return err
				}
				res = append(res, r)
			}
		}
		_, err = tx.Exec(ctx, `insert into funding_stream_cursors (stream, last_id) values ($1, $2)
			on conflict (stream) do update set last_id = greatest(funding_stream_cursors.last_id, excluded.last_id), updated_at = now()`,
			in.Stream, in.EventID)
		return err
	})
	return fresh, res, err
}

// apply is the status-guarded upsert of one piece of news, inside tx.
func (s *Store) apply(ctx context.Context, tx pgx.Tx, n News) (Result, error) {
	news, ok := funding.Map(n.Domain, n.BrokerStatus)
	if !ok {
		return Result{Review: true}, review(ctx, tx, n, reasonUnknownStatus)
	}
	m, found, err := s.lock(ctx, tx, n)
	if err != nil {
		return Result{}, err
	}
	if !found {
		return Result{Review: true}, review(ctx, tx, n, reasonUnknownRecord)
	}
	next, changed, effect := funding.Next(m.Status, news)
	if !changed {
		// The same status in another spelling (executed, then
		// activity_created) is kept; anything else is old news.
		if news == m.Status && n.BrokerStatus != m.BrokerStatus {
			_, err = tx.Exec(ctx, `update funding_movements set broker_status = $2, updated_at = now() where id = $1`, m.ID, n.BrokerStatus)
		}
		return Result{Status: m.Status}, err
	}
	if _, err := tx.Exec(ctx, `update funding_movements set status = $2, broker_status = $3, updated_at = now() where id = $1`,
		m.ID, next, n.BrokerStatus); err != nil {
		return Result{}, err
	}
	m.Status = next
	switch effect {
	case funding.Apply:
		err = s.entry(ctx, tx, m, "apply")
	case funding.Revert:
		err = s.entry(ctx, tx, m, "revert")
	case funding.ApplyAndRevert:
		if err = s.entry(ctx, tx, m, "apply"); err == nil {
			err = s.entry(ctx, tx, m, "revert")
		}
	}
	return Result{Changed: true, Status: next, Effect: effect}, err
}

// lock finds the news' movement and locks it for the rest of tx: by broker
// id, else by intent key (storing the broker id), else created from the
// news' details. Changes of one account are serialised — a stream, another
// stream and a poller may each bring news of it — by a transaction lock on
// the account taken before the row's.
//
// The row is found before the account's lock is held, and may change
// while the news waits for it: a write's answer folds the row into its
// intent's and deletes it (Accepted), or another stream mirrors the record
// under its broker id beside the intent the news found by key. Either way
// the news is looked up again under the lock, where it finds the row that
// now holds the broker id.
func (s *Store) lock(ctx context.Context, tx pgx.Tx, n News) (Movement, bool, error) {
	m, found, err := s.lockOnce(ctx, tx, n)
	if errors.Is(err, errMoved) {
		m, found, err = s.lockOnce(ctx, tx, n)
	}
	return m, found, err
}

// errMoved: the record's rows changed while the news waited for the
// account's lock.
var errMoved = errors.New("movement's rows changed while waiting for the account")

func (s *Store) lockOnce(ctx context.Context, tx pgx.Tx, n News) (Movement, bool, error) {
	var id int64
	var account string
	err := tx.QueryRow(ctx, `select id, account_id from funding_movements where domain = $1 and broker_id = $2`, n.Domain, n.BrokerID).Scan(&id, &account)
	if errors.Is(err, pgx.ErrNoRows) && n.IntentKey != "" {
		err = tx.QueryRow(ctx, `select id, account_id from funding_movements where domain = $1 and intent_key = $2 and (broker_id is null or broker_id = $3)`,
			n.Domain, n.IntentKey, n.BrokerID).Scan(&id, &account)
	}
	if errors.Is(err, pgx.ErrNoRows) && n.Details != nil {
		d := *n.Details
		if d.valid() != nil {
			// A record described as no movement can be (no amount, no
			// account) is not placed: review, rather than an error that
			// would hold the stream on this message forever.
			return Movement{}, false, nil
		}
		// The account's lock before the row the insert locks, the order
		// every writer of the account keeps.
		if err := lockAccount(ctx, tx, d.AccountID); err != nil {
			return Movement{}, false, err
		}
		err = tx.QueryRow(ctx, `insert into funding_movements (domain, broker_id, account_id, direction, amount, currency)
			values ($1, $2, $3, $4, $5, $6)
			on conflict (domain, broker_id) do update set broker_id = excluded.broker_id
			returning id, account_id`, n.Domain, n.BrokerID, d.AccountID, d.Direction, d.Amount, d.Currency).Scan(&id, &account)
		if err == nil && account != d.AccountID {
			err = lockAccount(ctx, tx, account)
		}
	} else if err == nil {
		err = lockAccount(ctx, tx, account)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return Movement{}, false, nil
	}
	if err != nil {
		return Movement{}, false, err
	}
	m, err := scanMovement(tx.QueryRow(ctx, `select `+movementCols+` from funding_movements where id = $1 for update`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Movement{}, false, fmt.Errorf("%s %s: %w", n.Domain, n.BrokerID, errMoved)
	}
	if err != nil {
		return Movement{}, false, err
	}
	if m.BrokerID == "" {
		var mirrored bool
		if err := tx.QueryRow(ctx, `select exists (select 1 from funding_movements where domain = $1 and broker_id = $2)`,
			n.Domain, n.BrokerID).Scan(&mirrored); err != nil {
			return Movement{}, false, err
		}
		if mirrored {
			return Movement{}, false, fmt.Errorf("%s %s: %w", n.Domain, n.BrokerID, errMoved)
		}
		if _, err := tx.Exec(ctx, `update funding_movements set broker_id = $2, updated_at = now() where id = $1`, m.ID, n.BrokerID); err != nil {
			return Movement{}, false, err
		}
		m.BrokerID = n.BrokerID
	}
	return m, true, nil
}

// lockAccount serialises the changes of one account until tx ends: a
// stream, another stream, a poller and a write's answer may each bring
// news of it.
func lockAccount(ctx context.Context, tx pgx.Tx, account string) error {
	_, err := tx.Exec(ctx, `select pg_advisory_xact_lock(hashtextextended('funding-account:' || $1, 0))`, account)
	return err
}

// entry books one entry of m (apply or revert) on its account, updates the
// balance and appends the account.* event, once: the entries' key stops a
// second apply or revert of the same movement.
func (s *Store) entry(ctx context.Context, tx pgx.Tx, m Movement, kind string) error {
	signed := m.Amount
	if m.Direction == Debit {
		signed = -signed
	}
	if kind == "revert" {
		signed = -signed
	}
	tag, err := tx.Exec(ctx, `insert into funding_entries (movement_id, kind, account_id, amount, currency) values ($1, $2, $3, $4, $5)
		on conflict do nothing`, m.ID, kind, m.AccountID, signed, m.Currency)
	if err != nil || tag.RowsAffected() == 0 {
		return err
	}
	if _, err := tx.Exec(ctx, `insert into funding_balances (account_id, currency, balance) values ($1, $2, $3)
		on conflict (account_id, currency) do update set balance = funding_balances.balance + excluded.balance`,
		m.AccountID, m.Currency, signed); err != nil {
		return err
	}
	var p contract.Payload
	switch {
	case kind == "apply" && m.Direction == Credit:
		p = contract.AccountCreditedV1{AccountID: m.AccountID, MovementID: m.BrokerID, Amount: m.Amount, Currency: m.Currency}
	case kind == "apply":
		p = contract.AccountDebitedV1{AccountID: m.AccountID, PaymentID: m.BrokerID, Amount: m.Amount, Currency: m.Currency}
	case m.Direction == Credit:
		p = contract.AccountCreditReversedV1{AccountID: m.AccountID, MovementID: m.BrokerID, Amount: m.Amount, Currency: m.Currency}
	default:
		p = contract.AccountDebitReversedV1{AccountID: m.AccountID, MovementID: m.BrokerID, Amount: m.Amount, Currency: m.Currency}
	}
	_, err = s.Outbox.Append(ctx, tx, outbox.Event{Payload: p})
	return err
}

// Reasons a piece of news goes to review.
const (
	reasonUnknownStatus = "unknown_status"
	reasonUnknownRecord = "unknown_record"
	// ReasonKeyConflict: the broker holds another request under an
	// intent's key, and none of the broker's records carries it.
	ReasonKeyConflict = "idempotency_conflict"
)

// Review sends n to the review queue for reason, changing nothing else.
func (s *Store) Review(ctx context.Context, n News, reason string) error {
	return pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error { return review(ctx, tx, n, reason) })
}

func review(ctx context.Context, tx pgx.Tx, n News, reason string) error {
	_, err := tx.Exec(ctx, `insert into funding_review (domain, broker_id, intent_key, broker_status, reason, source) values ($1, $2, $3, $4, $5, $6)`,
		n.Domain, n.BrokerID, n.IntentKey, n.BrokerStatus, reason, n.Source)
	if err == nil {
		reviews.WithLabelValues(string(n.Domain), reason).Inc()
	}
	return err
}
