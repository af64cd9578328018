// Package fundingstream is the LIVE layer of the broker rail: one
// consumer per broker event stream (journal status, funding status) that
// takes every message into the store's seen set, applies its news with a
// status-guarded upsert and moves the stream's persisted cursor, all in
// one transaction. It reconnects from that cursor — never from "now",
// which would lose everything sent while it was away — after a disconnect,
// a crash or a restart.
package fundingstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/concordhq/concord/services/funding"
	"github.com/concordhq/concord/services/funding/fundingbroker"
	"github.com/concordhq/concord/services/funding/fundingstore"
)

// Kind is one of the broker's event streams.
type Kind string

const (
	// Journals is /v2/events/journals/status.
	Journals Kind = "journals"
	// Funding is /v2/events/funding/status (transfers among its entities).
	Funding Kind = "funding"
	// Activities is /v2beta1/events/activities: the account activities
	// money movements book (JNLC for journals, CSD/CSW for transfers), a
	// second source of the same news, deduped on ref_id.
	Activities Kind = "activities"
)

// Path is the stream's path on the broker API.
func (k Kind) Path() string {
	switch k {
	case Journals:
		return "/v2/events/journals/status"
	case Activities:
		return "/v2beta1/events/activities"
	}
	return "/v2/events/funding/status"
}

// Origin is the cursor of a stream never read: its first event. Reading
// without a cursor would start at "now".
const Origin = "00000000000000000000000000"

// Consumer reads one stream.
type Consumer struct {
	Kind  Kind
	Store *fundingstore.Store
	// Broker reads the stream (its HTTP client must have no timeout) and
	// describes records the service has not seen.
	Broker *fundingbroker.Client
	// FirmAccount tells a journal's direction: from the firm is a credit
	// of the customer, to it a debit.
	FirmAccount string
	// Rewind is how far before the cursor's time a reconnect starts. The
	// broker keeps order per account only, so an event of one account can
	// arrive after a later one of another; the cursor is the greatest id
	// taken, and re-reading a little before it (the seen set drops what was
	// taken) catches an event overtaken just before a disconnect.
	Rewind time.Duration
	// Backoff is the pause before reconnecting (a second if zero).
	Backoff time.Duration
	// CallTimeout bounds each call that reads a record's details (ten
	// seconds if zero): the stream's client has no timeout, and a call
	// whose answer never comes would hold the stream.
	CallTimeout time.Duration
	Logger      *slog.Logger
}

// Run reads the stream until ctx ends, reconnecting from the persisted
// cursor whenever the stream ends or fails.
func (c *Consumer) Run(ctx context.Context) error {
	backoff := c.Backoff
	if backoff <= 0 {
		backoff = time.Second
	}
	for {
		err := c.Once(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && c.Logger != nil {
			c.Logger.Warn("funding stream ended", "stream", c.Kind, "err", err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Once connects once from the persisted cursor and takes messages in
// until the stream ends.
func (c *Consumer) Once(ctx context.Context) error {
	cursor, err := c.Store.Cursor(ctx, string(c.Kind))
	if err != nil {
		return err
	}
	return c.Broker.Stream(ctx, c.Kind.Path(), Since(cursor, c.Rewind), func(data []byte) error {
		return c.take(ctx, data)
	})
}

// Since is the since_id to reconnect with: Origin for a stream never read,
// else the ULID of rewind before the cursor's time (the least id of that
// millisecond, since_id being exclusive).
func Since(cursor string, rewind time.Duration) string {
	if cursor == "" {
		return Origin
	}
	if rewind <= 0 {
		return cursor
	}
	ms, ok := ulidTime(cursor)
	if !ok {
		return cursor
	}
	back := ms - uint64(rewind.Milliseconds())
	if uint64(rewind.Milliseconds()) > ms {
		back = 0
	}
	return ulidOfTime(back)
}

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// ulidTime is the millisecond time in the first ten characters of a ULID.
func ulidTime(id string) (uint64, bool) {
	if len(id) != 26 {
		return 0, false
	}
	var ms uint64
	for _, r := range strings.ToUpper(id[:10]) {
		i := strings.IndexRune(crockford, r)
		if i < 0 {
			return 0, false
		}
		ms = ms<<5 | uint64(i)
	}
	return ms, true
}

func ulidOfTime(ms uint64) string {
	var b [26]byte
	for i := range b {
		b[i] = '0'
	}
	for i := 9; i >= 0; i-- {
		b[i] = crockford[ms&31]
		ms >>= 5
	}
	return string(b[:])
}

type journalEvent struct {
	EventID        string `json:"event_id"`
	JournalID      string `json:"journal_id"`
	StatusTo       string `json:"status_to"`
	IdempotencyKey string `json:"idempotency_key"`
}

type activityEvent struct {
	EventID         string `json:"event_id"`
	RefID           string `json:"ref_id"`
	PreviousID      string `json:"previous_id"`
	AccountID       string `json:"account_id"`
	ActivityType    string `json:"activity_type"`
	ActivitySubtype string `json:"activity_subtype"`
	Status          string `json:"status"`
	Details         struct {
		JournalID  string `json:"journal_id"`
		TransferID string `json:"transfer_id"`
	} `json:"details"`
}

type fundingEvent struct {
	EventID    string `json:"event_id"`
	AccountID  string `json:"account_id"`
	EntityID   string `json:"entity_id"`
	EntityType string `json:"entity_type"`
	StatusTo   string `json:"status_to"`
}

// take takes one message in. Messages of one stream are taken one at a
// time, in the order they come; news of one account from several streams
// and pollers is serialised by the store.
func (c *Consumer) take(ctx context.Context, data []byte) error {
	var id string
	var news []fundingstore.News
	var err error
	switch c.Kind {
	case Journals:
		var ev journalEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			return fmt.Errorf("journal event %s: %w", data, err)
		}
		id = ev.EventID
		news, err = c.journalNews(ctx, ev)
	case Activities:
		var ev activityEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			return fmt.Errorf("activity %s: %w", data, err)
		}
		if ev.RefID == "" || ev.EventID == "" {
			return fmt.Errorf("activity without ref_id or event_id: %s", data)
		}
		news, err = c.activityNews(ctx, ev)
		if err != nil {
			return err
		}
		// The activities stream's dedupe key is ref_id (a replay may send
		// an activity under another event_id); event_id is its cursor.
		return c.commit(ctx, fundingstore.Intake{Stream: string(c.Kind), DedupeKey: ev.RefID, EventID: ev.EventID, Payload: data}, news)
	default:
		var ev fundingEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			return fmt.Errorf("funding event %s: %w", data, err)
		}
		id = ev.EventID
		news, err = c.fundingNews(ctx, ev)
	}
	if err != nil {
		return err
	}
	if id == "" {
		return fmt.Errorf("%s event without event_id: %s", c.Kind, data)
	}
	return c.commit(ctx, fundingstore.Intake{Stream: string(c.Kind), DedupeKey: id, EventID: id, Payload: data}, news)
}

// commit takes the message in. A shutdown does not cut it short: a
// commit cancelled half-way may still land after Run returned, so the
// message in hand is finished (within a bound) and Run returns after it.
func (c *Consumer) commit(ctx context.Context, in fundingstore.Intake, news []fundingstore.News) error {
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_, _, err := c.Store.Take(tctx, in, news...)
	return err
}

// activityNews is the news an activity brings: a JNLC activity says its
// journal executed, and one with previous_id says the journal of the
// activity it replaces was corrected; a CSD/CSW activity says its transfer
// completed, or, as a RETURN, that it was returned. Other activities
// (trades, fees, dividends) are taken in and change nothing.
func (c *Consumer) activityNews(ctx context.Context, ev activityEvent) ([]fundingstore.News, error) {
	if seen, err := c.Store.Seen(ctx, string(Activities), ev.RefID); err != nil || seen {
		return nil, err
	}
	var news []fundingstore.News
	switch {
	case ev.ActivityType == "JNLC" && ev.Details.JournalID != "":
		if ev.PreviousID != "" {
			prev, err := c.previousJournal(ctx, ev.PreviousID)
			if err != nil {
				return nil, err
			}
			if prev != "" {
				news = append(news, fundingstore.News{Domain: funding.Journal, BrokerID: prev, BrokerStatus: "correct", Source: "stream:activities"})
			}
		}
		n, err := c.journalNews(ctx, journalEvent{EventID: ev.RefID, JournalID: ev.Details.JournalID, StatusTo: ev.Status})
		if err != nil {
			return nil, err
		}
		news = append(news, n...)
	case (ev.ActivityType == "CSD" || ev.ActivityType == "CSW") && ev.Details.TransferID != "":
		status := "COMPLETE"
		if strings.EqualFold(ev.ActivitySubtype, "RETURN") {
			status = "RETURNED"
		}
		n, err := c.fundingNews(ctx, fundingEvent{EventID: ev.RefID, AccountID: ev.AccountID, EntityID: ev.Details.TransferID,
			EntityType: "Transfer", StatusTo: status})
		if err != nil {
			return nil, err
		}
		news = n
	}
	for i := range news {
		news[i].Source = "stream:activities"
	}
	return news, nil
}

// previousJournal is the journal of the activity ref taken in before
// ("" when it was not).
func (c *Consumer) previousJournal(ctx context.Context, ref string) (string, error) {
	b, found, err := c.Store.Payload(ctx, string(Activities), ref)
	if err != nil || !found {
		return "", err
	}
	var prev activityEvent
	if err := json.Unmarshal(b, &prev); err != nil {
		return "", fmt.Errorf("activity %s: %w", ref, err)
	}
	return prev.Details.JournalID, nil
}

// journalNews is the news of a journal event, with the journal's details
// read from the broker when the service does not know it (a corrected
// journal's replacement, a journal made by someone else).
func (c *Consumer) journalNews(ctx context.Context, ev journalEvent) ([]fundingstore.News, error) {
	n := fundingstore.News{Domain: funding.Journal, BrokerID: ev.JournalID, BrokerStatus: ev.StatusTo, IntentKey: ev.IdempotencyKey,
		Source: "stream:" + string(Journals)}
	if known, err := c.known(ctx, ev.EventID, n); err != nil || known {
		return []fundingstore.News{n}, err
	}
	cctx, cancel := c.callContext(ctx)
	defer cancel()
	j, err := c.Broker.GetJournal(cctx, ev.JournalID)
	if fundingbroker.IsStatus(err, http.StatusNotFound) {
		return []fundingstore.News{n}, nil // the store sends it to review
	}
	if err != nil {
		return nil, fmt.Errorf("journal %s: %w", ev.JournalID, err)
	}
	cents, err := fundingbroker.ParseCents(j.NetAmount)
	if err != nil {
		return []fundingstore.News{n}, nil // no movement it can describe: review
	}
	d := &fundingstore.Movement{AccountID: j.ToAccount, Direction: fundingstore.Credit, Amount: cents, Currency: currency(j.Currency)}
	if j.ToAccount == c.FirmAccount {
		d.AccountID, d.Direction = j.FromAccount, fundingstore.Debit
	}
	n.Details = d
	return []fundingstore.News{n}, nil
}

// fundingNews is the news of a funding status event about a transfer;
// other entities (bank relationships, wallets) are taken in and change
// nothing.
func (c *Consumer) fundingNews(ctx context.Context, ev fundingEvent) ([]fundingstore.News, error) {
	if ev.EntityType != "Transfer" {
		return nil, nil
	}
	n := fundingstore.News{Domain: funding.Transfer, BrokerID: ev.EntityID, BrokerStatus: ev.StatusTo, Source: "stream:" + string(Funding)}
	if known, err := c.known(ctx, ev.EventID, n); err != nil || known {
		return []fundingstore.News{n}, err
	}
	// No GET by id for transfers: the account's list is the only way.
	cctx, cancel := c.callContext(ctx)
	defer cancel()
	ts, err := c.Broker.ListTransfers(cctx, ev.AccountID)
	if err != nil {
		return nil, fmt.Errorf("transfers of %s: %w", ev.AccountID, err)
	}
	for _, t := range ts {
		if t.ID != ev.EntityID {
			continue
		}
		cents, err := fundingbroker.ParseCents(t.Amount)
		if err != nil {
			break // no movement it can describe: review
		}
		dir := fundingstore.Credit
		if strings.EqualFold(t.Direction, "OUTGOING") {
			dir = fundingstore.Debit
		}
		n.Details = &fundingstore.Movement{AccountID: t.AccountID, Direction: dir, Amount: cents, Currency: "USD"}
		break
	}
	// Still no details: the store sends the news to review.
	return []fundingstore.News{n}, nil
}

// known reports whether n needs no details from the broker: the message
// was taken in before, or the record is known by its id or intent key.
func (c *Consumer) known(ctx context.Context, eventID string, n fundingstore.News) (bool, error) {
	if _, ok := funding.Map(n.Domain, n.BrokerStatus); !ok {
		return true, nil // goes to review as it is
	}
	if seen, err := c.Store.Seen(ctx, string(c.Kind), eventID); err != nil || seen {
		return seen, err
	}
	_, err := c.Store.ByBrokerID(ctx, n.Domain, n.BrokerID)
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, fundingstore.ErrNotFound) {
		return false, err
	}
	if n.IntentKey == "" {
		return false, nil
	}
	m, err := c.Store.ByKey(ctx, n.IntentKey)
	if errors.Is(err, fundingstore.ErrNotFound) {
		return false, nil
	}
	// An intent bound to another journal: this one carries its key but is
	// another record (a correction's replacement may copy what the
	// original carried).
	return err == nil && (m.BrokerID == "" || m.BrokerID == n.BrokerID), err
}

func (c *Consumer) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d := c.CallTimeout
	if d <= 0 {
		d = 10 * time.Second
	}
	return context.WithTimeout(ctx, d)
}

func currency(c string) string {
	if c == "" {
		return "USD"
	}
	return strings.ToUpper(c)
}
