// Package fundingprojection is the balance of each account as a consumer
// of account-events builds it: every account.* event funding-svc publishes,
// decoded through the contract and applied once (the idempotent runner's
// dedupe in the same transaction), adds to or takes from its account's row
// of account_balance_projection. It is read-only to everyone else and is
// rebuilt from the topic, never written from funding's own tables.
package fundingprojection

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/pgmigrate"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/funding"
)

//go:embed migrations/*.sql
var migrations embed.FS

// VersionTable records which of these migrations ran.
const VersionTable = "funding_projection_schema_version"

// Migrate creates or updates the projection's table.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return pgmigrate.ApplyDir(ctx, pool, VersionTable, migrations, "migrations")
}

// Topic is the topic the projection reads.
var Topic = contract.TypeAccountCredited.Topic()

// Types are the events the projection applies.
var Types = []contract.Type{contract.TypeAccountCredited, contract.TypeAccountDebited,
	contract.TypeAccountCreditReversed, contract.TypeAccountDebitReversed}

// Register adds the projection's handlers to mux.
func Register(mux *idempotent.Mux) {
	on(mux, func(d contract.AccountCreditedV1) (string, string, int64) { return d.AccountID, d.Currency, d.Amount })
	on(mux, func(d contract.AccountDebitedV1) (string, string, int64) { return d.AccountID, d.Currency, d.Amount })
	on(mux, func(d contract.AccountCreditReversedV1) (string, string, int64) {
		return d.AccountID, d.Currency, d.Amount
	})
	on(mux, func(d contract.AccountDebitReversedV1) (string, string, int64) {
		return d.AccountID, d.Currency, d.Amount
	})
}

// on registers the handler of one account.* payload type, fields giving its
// account, currency and amount.
func on[T contract.Payload](mux *idempotent.Mux, fields func(T) (account, currency string, amount int64)) {
	idempotent.Handle(mux, func(ctx context.Context, tx pgx.Tx, ev idempotent.Event, d T, _ outbox.Emitter) error {
		account, currency, amount := fields(d)
		delta, ok := funding.EventDelta(ev.Type(), amount)
		if !ok {
			return idempotent.Permanent(fmt.Errorf("event %s: %s is no account event", ev.EventID, ev.Type()))
		}
		return apply(ctx, tx, ev, account, currency, delta)
	})
}

func apply(ctx context.Context, tx pgx.Tx, ev idempotent.Event, account, currency string, delta int64) error {
	_, err := tx.Exec(ctx, `insert into account_balance_projection
		(account_id, currency, balance, events, last_event_id, last_partition, last_offset)
		values ($1, $2, $3, 1, $4, $5, $6)
		on conflict (account_id, currency) do update set balance = account_balance_projection.balance + excluded.balance,
			events = account_balance_projection.events + 1, last_event_id = excluded.last_event_id,
			last_partition = excluded.last_partition, last_offset = excluded.last_offset, updated_at = now()`,
		account, currency, delta, ev.EventID, ev.Partition, ev.Offset)
	if err != nil {
		return fmt.Errorf("project event %s on account %s: %w", ev.EventID, account, err)
	}
	return nil
}

// Balance is one account's projected balance.
type Balance struct {
	AccountID string    `json:"account_id"`
	Currency  string    `json:"currency"`
	Balance   int64     `json:"balance"` // cents
	Events    int64     `json:"events"`  // account.* events applied
	LastEvent string    `json:"last_event_id,omitempty"`
	Partition int32     `json:"last_partition"`
	Offset    int64     `json:"last_offset"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// Read is account's projected balance in currency; an account no event
// named has a zero balance and no events.
func Read(ctx context.Context, pool *pgxpool.Pool, account, currency string) (Balance, error) {
	b := Balance{AccountID: account, Currency: currency}
	err := pool.QueryRow(ctx, `select balance, events, last_event_id, last_partition, last_offset, updated_at
		from account_balance_projection where account_id = $1 and currency = $2`, account, currency).
		Scan(&b.Balance, &b.Events, &b.LastEvent, &b.Partition, &b.Offset, &b.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return b, nil
	}
	if err != nil {
		return b, fmt.Errorf("projected balance of account %s: %w", account, err)
	}
	return b, nil
}
