package auditsnapshot

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/audit"
	"github.com/concordhq/concord/services/funding"
	"github.com/concordhq/concord/services/funding/fundingbroker"
	"github.com/concordhq/concord/services/funding/fundingstream"
)

// RailSources are where a rail snapshot is read from: funding-svc's
// database, the broker, the firm's account there (the other side of every
// journal) and the customer accounts to read.
type RailSources struct {
	Funding  *pgxpool.Pool
	Broker   *fundingbroker.Client
	Firm     string
	Accounts []string
}

// ReadRail reads a rail snapshot (without Streams: StreamWindows reads
// those, around a kill).
func ReadRail(ctx context.Context, src RailSources) (audit.RailSnapshot, error) {
	var s audit.RailSnapshot
	var err error
	read := reads("rail snapshot", &err)
	read("movements", func() (e error) {
		s.Movements, e = rows(ctx, src.Funding, `select id, domain, coalesce(broker_id, ''), coalesce(intent_key, ''), account_id, direction, amount,
			status, broker_status from funding_movements order by id`, pgx.RowToStructByPos[audit.RailMovement])
		return e
	})
	read("entries", func() (e error) {
		s.Entries, e = rows(ctx, src.Funding, `select movement_id, kind, account_id, amount from funding_entries`, pgx.RowToStructByPos[audit.RailEntry])
		return e
	})
	read("balances", func() error {
		bs, e := rows(ctx, src.Funding, `select account_id, balance from funding_balances where currency = 'USD'`,
			pgx.RowToStructByPos[struct {
				Account string
				Balance int64
			}])
		s.Balances = map[string]int64{}
		for _, b := range bs {
			s.Balances[b.Account] = b.Balance
		}
		return e
	})
	read("projection", func() error {
		ps, e := rows(ctx, src.Funding, `select account_id, balance, events from account_balance_projection where currency = 'USD'`,
			pgx.RowToStructByPos[struct {
				Account string
				audit.Projected
			}])
		s.Projection = map[string]audit.Projected{}
		for _, p := range ps {
			s.Projection[p.Account] = p.Projected
		}
		return e
	})
	read("reviews", func() (e error) {
		s.Reviews, e = rows(ctx, src.Funding, `select domain || ' ' || broker_id || ' ' || broker_status || ': ' || reason || ' (' || source || ')'
			from funding_review order by id`, pgx.RowTo[string])
		return e
	})
	read("account events", func() error {
		payloads, e := rows(ctx, src.Funding, `select payload from outbox where event_type like 'account.%' order by id`, pgx.RowTo[[]byte])
		if e != nil {
			return e
		}
		for _, p := range payloads {
			ev, e := accountEvent(p)
			if e != nil {
				return e
			}
			s.Events = append(s.Events, ev)
		}
		return nil
	})
	read("broker", func() (e error) {
		s.Broker, s.Cash, e = brokerRecords(ctx, src)
		return e
	})
	return s, err
}

// accountEvent decodes one account.* outbox payload through the contract.
func accountEvent(payload []byte) (audit.AccountEvent, error) {
	env, err := schemas.DecodeEnvelope(payload)
	if err != nil {
		return audit.AccountEvent{}, err
	}
	ev := audit.AccountEvent{EventID: env.EventID, Type: contract.Type(env.EventType)}
	switch contract.Type(env.EventType) {
	case contract.TypeAccountCredited:
		p, err := contract.Decode[contract.AccountCreditedV1](env)
		ev.AccountID, ev.MovementID, ev.Amount = p.AccountID, p.MovementID, p.Amount
		return ev, err
	case contract.TypeAccountDebited:
		p, err := contract.Decode[contract.AccountDebitedV1](env)
		ev.AccountID, ev.MovementID, ev.Amount = p.AccountID, p.PaymentID, p.Amount
		return ev, err
	case contract.TypeAccountCreditReversed:
		p, err := contract.Decode[contract.AccountCreditReversedV1](env)
		ev.AccountID, ev.MovementID, ev.Amount = p.AccountID, p.MovementID, p.Amount
		return ev, err
	case contract.TypeAccountDebitReversed:
		p, err := contract.Decode[contract.AccountDebitReversedV1](env)
		ev.AccountID, ev.MovementID, ev.Amount = p.AccountID, p.MovementID, p.Amount
		return ev, err
	}
	return ev, fmt.Errorf("event %s: unexpected type %s", env.EventID, env.EventType)
}

// brokerRecords reads every journal, transfer and funding-wallet transfer
// of the accounts, and their cash, from the broker.
func brokerRecords(ctx context.Context, src RailSources) ([]audit.BrokerRecord, map[string]int64, error) {
	var out []audit.BrokerRecord
	cash := map[string]int64{}
	ours := map[string]bool{}
	for _, a := range src.Accounts {
		ours[a] = true
	}
	journals, err := src.Broker.ListJournals(ctx, fundingbroker.JournalFilter{})
	if err != nil {
		return nil, nil, err
	}
	for _, j := range journals {
		account, dir := j.ToAccount, "credit"
		if j.ToAccount == src.Firm {
			account, dir = j.FromAccount, "debit"
		}
		if !ours[account] {
			continue
		}
		amount, err := fundingbroker.ParseCents(j.NetAmount)
		if err != nil {
			return nil, nil, fmt.Errorf("journal %s: %w", j.ID, err)
		}
		out = append(out, audit.BrokerRecord{Domain: funding.Journal, ID: j.ID, AccountID: account, Direction: dir, Amount: amount, Status: j.Status})
	}
	for _, a := range src.Accounts {
		transfers, err := src.Broker.ListTransfers(ctx, a)
		if err != nil {
			return nil, nil, fmt.Errorf("transfers of %s: %w", a, err)
		}
		wallet, err := src.Broker.ListWalletTransfers(ctx, a)
		if err != nil {
			return nil, nil, fmt.Errorf("wallet transfers of %s: %w", a, err)
		}
		if out, err = appendRecords(out, funding.Transfer, a, transfers, func(t fundingbroker.Transfer) (string, string, string, string) {
			return t.ID, t.Direction, t.Amount, t.Status
		}); err != nil {
			return nil, nil, err
		}
		if out, err = appendRecords(out, funding.WalletTransfer, a, wallet, func(w fundingbroker.WalletTransfer) (string, string, string, string) {
			return w.ID, w.Direction, w.TotalAmount, w.Status
		}); err != nil {
			return nil, nil, err
		}
		if cash[a], err = src.Broker.Cash(ctx, a); err != nil {
			return nil, nil, fmt.Errorf("cash of %s: %w", a, err)
		}
	}
	return out, cash, nil
}

// appendRecords appends an account's transfers of domain d, fields giving
// each one's id, direction, amount and status as the broker spells them.
func appendRecords[T any](out []audit.BrokerRecord, d funding.Domain, account string, items []T,
	fields func(T) (id, dir, amount, status string)) ([]audit.BrokerRecord, error) {
	for _, it := range items {
		id, dir, amt, status := fields(it)
		amount, err := fundingbroker.ParseCents(amt)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", d, id, err)
		}
		out = append(out, audit.BrokerRecord{Domain: d, ID: id, AccountID: account, Direction: direction(dir), Amount: amount, Status: status})
	}
	return out, nil
}

// direction is the customer's side of a transfer's direction (INCOMING,
// incoming: money arrives on the account).
func direction(d string) string {
	if strings.EqualFold(d, "incoming") {
		return "credit"
	}
	return "debit"
}

// Cursors reads funding-svc's persisted cursor of each status stream.
func Cursors(ctx context.Context, pool *pgxpool.Pool) (map[string]string, error) {
	cs, err := rows(ctx, pool, `select stream, last_id from funding_stream_cursors`, pgx.RowToStructByPos[struct{ Stream, LastID string }])
	out := map[string]string{}
	for _, c := range cs {
		out[c.Stream] = c.LastID
	}
	return out, err
}

// StreamWindows reads, for each stream, what the broker sent after the
// cursor a killed funding-svc left (atKill) up to its cursor now, and the
// event ids funding-svc took in: audit.CursorsSurvivedKill's input. Read
// it once the rail is quiet and before a fault that drops messages (a
// dropped message is missed by design, and healed elsewhere).
func StreamWindows(ctx context.Context, pool *pgxpool.Pool, broker *fundingbroker.Client, atKill map[string]string) ([]audit.StreamWindow, error) {
	now, err := Cursors(ctx, pool)
	if err != nil {
		return nil, err
	}
	var out []audit.StreamWindow
	for _, k := range []fundingstream.Kind{fundingstream.Journals, fundingstream.Funding, fundingstream.Activities} {
		w := audit.StreamWindow{Stream: string(k), AtKill: atKill[string(k)], After: now[string(k)], Seen: map[string]bool{}}
		if w.AtKill != "" && w.After > w.AtKill {
			err := broker.ReplayIDs(ctx, k.Path(), w.AtKill, w.After, func(data []byte) error {
				var m struct {
					EventID string `json:"event_id"`
				}
				if err := json.Unmarshal(data, &m); err != nil {
					return fmt.Errorf("stream %s: %w", k, err)
				}
				w.Broker = append(w.Broker, m.EventID)
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("replay %s (%s, %s): %w", k, w.AtKill, w.After, err)
			}
		}
		ids, err := rows(ctx, pool, `select event_id from funding_stream_intake where stream = $1`, pgx.RowTo[string], string(k))
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			w.Seen[id] = true
		}
		out = append(out, w)
	}
	return out, nil
}
