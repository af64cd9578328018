// Package fundingstore is funding-svc's database: the money movements of
// the broker rail keyed by the broker's ids, the intent rows written before
// each broker call, the raw intake of the broker's streams with one cursor
// per stream, the review queue for news no map knows, and the balances the
// movements' entries add up to. Every entry appends an account.* event to
// the outbox in the transaction that makes it.
package fundingstore

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/pgmigrate"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/services/funding"
)

//go:embed migrations/*.sql
var migrations embed.FS

// VersionTable records which funding migrations ran.
const VersionTable = "funding_schema_version"

// Migrate creates or updates the funding tables.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return pgmigrate.ApplyDir(ctx, pool, VersionTable, migrations, "migrations")
}

// Errors callers branch on.
var (
	ErrNotFound = errors.New("movement not found")
	// ErrIntentConflict: the intent key was used before for another
	// request (another account, direction, amount or currency).
	ErrIntentConflict = errors.New("intent key already used for another request")
	// ErrBrokerIDConflict: the intent already holds another broker id.
	ErrBrokerIDConflict = errors.New("intent already bound to another broker id")
)

// MaxKey is the longest intent key: the broker's limit on an
// Idempotency-Key and a client id.
const MaxKey = 128

// Direction is which way a movement moves the account's money.
type Direction string

const (
	Credit Direction = "credit"
	Debit  Direction = "debit"
)

// Movement is one broker record as the service mirrors it.
type Movement struct {
	ID           int64
	Domain       funding.Domain
	IntentKey    string // "" for a record first seen at the broker
	BrokerID     string // "" until the broker's answer or an event names it
	AccountID    string
	Direction    Direction
	Amount       int64 // minor units (cents)
	Currency     string
	Status       funding.Status // "" until the broker accepted it
	BrokerStatus string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Store reads and writes the funding tables.
type Store struct {
	Pool *pgxpool.Pool
	// Outbox routes the events the store appends (its topic prefix); the
	// zero value uses the catalog's topics.
	Outbox outbox.Writer
}

const movementCols = `id, domain, coalesce(intent_key, ''), coalesce(broker_id, ''), account_id, direction, amount, currency, status, broker_status, created_at, updated_at`

func scanMovement(row pgx.Row) (Movement, error) {
	var m Movement
	var domain, dir, status string
	err := row.Scan(&m.ID, &domain, &m.IntentKey, &m.BrokerID, &m.AccountID, &dir, &m.Amount, &m.Currency, &status, &m.BrokerStatus, &m.CreatedAt, &m.UpdatedAt)
	m.Domain, m.Direction, m.Status = funding.Domain(domain), Direction(dir), funding.Status(status)
	return m, err
}

func requestHash(m Movement) string {
	s := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%s\x00%d\x00%s", m.Domain, m.AccountID, m.Direction, m.Amount, m.Currency))
	return hex.EncodeToString(s[:])
}

func (m Movement) valid() error {
	switch {
	case m.AccountID == "":
		return errors.New("movement without an account")
	case m.Direction != Credit && m.Direction != Debit:
		return fmt.Errorf("movement direction %q", m.Direction)
	case m.Amount <= 0:
		return fmt.Errorf("movement amount %d", m.Amount)
	case len(m.Currency) != 3:
		return fmt.Errorf("movement currency %q", m.Currency)
	}
	return nil
}

// Intend writes the intent row of a movement the service is about to ask
// the broker for, before it asks: a crash during the call leaves a row to
// find the broker's record by. The same key for the same request returns
// the row written first (created=false) — a retry continues it rather than
// starting another; another request under the key is ErrIntentConflict.
func (s *Store) Intend(ctx context.Context, m Movement) (_ Movement, created bool, err error) {
	if m.IntentKey == "" || len(m.IntentKey) > MaxKey {
		return Movement{}, false, fmt.Errorf("intent key of %d characters (1 to %d)", len(m.IntentKey), MaxKey)
	}
	if err := m.valid(); err != nil {
		return Movement{}, false, err
	}
	hash := requestHash(m)
	row := s.Pool.QueryRow(ctx, `insert into funding_movements (domain, intent_key, request_hash, account_id, direction, amount, currency)
		values ($1, $2, $3, $4, $5, $6, $7) on conflict (intent_key) do nothing returning `+movementCols,
		m.Domain, m.IntentKey, hash, m.AccountID, m.Direction, m.Amount, m.Currency)
	got, err := scanMovement(row)
	if err == nil {
		return got, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return Movement{}, false, err
	}
	var stored string
	if err := s.Pool.QueryRow(ctx, `select coalesce(request_hash, '') from funding_movements where intent_key = $1`, m.IntentKey).Scan(&stored); err != nil {
		return Movement{}, false, err
	}
	if stored != hash {
		return Movement{}, false, fmt.Errorf("intent %s: %w", m.IntentKey, ErrIntentConflict)
	}
	got, err = s.ByKey(ctx, m.IntentKey)
	return got, false, err
}

// ByKey is the movement of an intent key.
func (s *Store) ByKey(ctx context.Context, key string) (Movement, error) {
	m, err := scanMovement(s.Pool.QueryRow(ctx, `select `+movementCols+` from funding_movements where intent_key = $1`, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return Movement{}, fmt.Errorf("intent %s: %w", key, ErrNotFound)
	}
	return m, err
}

// ByBrokerID is the movement the broker knows as id in domain d.
func (s *Store) ByBrokerID(ctx context.Context, d funding.Domain, id string) (Movement, error) {
	m, err := scanMovement(s.Pool.QueryRow(ctx, `select `+movementCols+` from funding_movements where domain = $1 and broker_id = $2`, d, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Movement{}, fmt.Errorf("%s %s: %w", d, id, ErrNotFound)
	}
	return m, err
}

// Unanswered lists intents of domain d that hold no broker id yet and
// that the broker did not refuse, oldest first: calls whose outcome the
// service does not know.
func (s *Store) Unanswered(ctx context.Context, d funding.Domain) ([]Movement, error) {
	return s.list(ctx, `select `+movementCols+` from funding_movements
		where domain = $1 and broker_id is null and intent_key is not null and refused is null order by id`, d)
}

// Refused records the broker's definite refusal of an intent it gave no
// id: the caller is told the request failed, so nothing sends it again
// unless the same request is submitted again.
func (s *Store) Refused(ctx context.Context, key, answer string) error {
	_, err := s.Pool.Exec(ctx, `update funding_movements set refused = $2, updated_at = now()
		where intent_key = $1 and broker_id is null`, key, answer)
	if err != nil {
		return fmt.Errorf("intent %s: record the refusal: %w", key, err)
	}
	return nil
}

// Open lists the records of domain d the broker is not done with, least
// recently changed first, at most limit: all a poller needs to ask about.
// Those are the records with a broker id that are not final, except that
// a COMPLETED one is listed only while it changed within completedWithin:
// completed is not final (a return or correction can follow), but a poll
// need not ask about it forever.
func (s *Store) Open(ctx context.Context, d funding.Domain, completedWithin time.Duration, limit int) ([]Movement, error) {
	return s.list(ctx, `select `+movementCols+` from funding_movements
		where domain = $1 and broker_id is not null
		  and (status in ('', 'PENDING') or (status = 'COMPLETED' and updated_at > now() - $2::interval))
		order by updated_at, id limit $3`, d, completedWithin, limit)
}

func (s *Store) list(ctx context.Context, q string, args ...any) ([]Movement, error) {
	rows, err := s.Pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Movement, error) { return scanMovement(r) })
}

// Balance is the account's balance in currency as this service books it:
// the sum of its movements' entries (fundingprojection holds the one a
// consumer of account-events builds).
func (s *Store) Balance(ctx context.Context, account, currency string) (int64, error) {
	var b int64
	err := s.Pool.QueryRow(ctx, `select coalesce((select balance from funding_balances where account_id = $1 and currency = $2), 0)`, account, currency).Scan(&b)
	return b, err
}

// Review is one piece of news the service could not apply.
type Review struct {
	Domain       funding.Domain
	BrokerID     string
	IntentKey    string
	BrokerStatus string
	Reason       string
	Source       string
	At           time.Time
}

// Reviews lists the review queue, oldest first.
func (s *Store) Reviews(ctx context.Context) ([]Review, error) {
	rows, err := s.Pool.Query(ctx, `select domain, broker_id, intent_key, broker_status, reason, source, at from funding_review order by id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Review, error) {
		var v Review
		var d string
		err := r.Scan(&d, &v.BrokerID, &v.IntentKey, &v.BrokerStatus, &v.Reason, &v.Source, &v.At)
		v.Domain = funding.Domain(d)
		return v, err
	})
}

// Cursor is the stream's persisted cursor: the greatest event id taken in
// ("" when nothing was).
func (s *Store) Cursor(ctx context.Context, stream string) (string, error) {
	var id string
	err := s.Pool.QueryRow(ctx, `select coalesce((select last_id from funding_stream_cursors where stream = $1), '')`, stream).Scan(&id)
	return id, err
}

// Seen reports whether the stream's message with dedupeKey was taken in.
func (s *Store) Seen(ctx context.Context, stream, dedupeKey string) (bool, error) {
	var seen bool
	err := s.Pool.QueryRow(ctx, `select exists (select 1 from funding_stream_intake where stream = $1 and dedupe_key = $2)`, stream, dedupeKey).Scan(&seen)
	return seen, err
}

// Accepted stores the broker's id of the intent key as soon as the broker
// names it, and marks an intent the broker had not yet been seen to accept
// PENDING: the create call's 200 means accepted, not settled, so no money
// moves on it — the status streams and polls say when it does. A key
// already bound to another id is ErrBrokerIDConflict.
//
// A stream may have mirrored the record before the answer came (a
// transfer's events carry no key to link it to its intent): that row is
// folded into the intent's — its status and entries move over, its events
// stand, since they name the broker's id — and removed.
func (s *Store) Accepted(ctx context.Context, key, brokerID string) (Movement, error) {
	var m Movement
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		// The account's lock first, then the rows, as apply takes them: in
		// the other order, an answer and a stream message of one account
		// deadlock.
		var account string
		err := tx.QueryRow(ctx, `select account_id from funding_movements where intent_key = $1`, key).Scan(&account)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("intent %s: %w", key, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if err := lockAccount(ctx, tx, account); err != nil {
			return err
		}
		in, err := scanMovement(tx.QueryRow(ctx, `select `+movementCols+` from funding_movements where intent_key = $1 for update`, key))
		if err != nil {
			return err
		}
		if in.BrokerID != "" && in.BrokerID != brokerID {
			return fmt.Errorf("intent %s holds %s, the broker named %s: %w", key, in.BrokerID, brokerID, ErrBrokerIDConflict)
		}
		status, brokerStatus := in.Status, in.BrokerStatus
		var orphan int64
		err = tx.QueryRow(ctx, `select id, status, broker_status from funding_movements
			where domain = $1 and broker_id = $2 and intent_key is null for update`, in.Domain, brokerID).Scan(&orphan, &status, &brokerStatus)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		default:
			if _, err := tx.Exec(ctx, `update funding_entries set movement_id = $1 where movement_id = $2`, in.ID, orphan); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `delete from funding_movements where id = $1`, orphan); err != nil {
				return err
			}
		}
		if status == "" {
			status = funding.Pending
		}
		m, err = scanMovement(tx.QueryRow(ctx, `update funding_movements set broker_id = $2, status = $3, broker_status = $4, refused = null, updated_at = now()
			where id = $1 returning `+movementCols, in.ID, brokerID, status, brokerStatus))
		return err
	})
	return m, err
}

// Payload is the stream's message taken in under dedupeKey, as received
// (found is false for one never taken in).
func (s *Store) Payload(ctx context.Context, stream, dedupeKey string) (payload []byte, found bool, err error) {
	err = s.Pool.QueryRow(ctx, `select payload from funding_stream_intake where stream = $1 and dedupe_key = $2`, stream, dedupeKey).Scan(&payload)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	return payload, err == nil, err
}
