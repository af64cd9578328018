package fundingprojection_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/relay/publisher"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/funding/fundingprojection"
)

const within = 60 * time.Second

// stand is funding-svc's database with the outbox, the relay publishing it
// to a topic of the test's own, and the projection's consumer on the
// idempotent runner, both on real Kafka.
type stand struct {
	t      *testing.T
	pool   *pgxpool.Pool
	kafka  *testkit.Kafka
	events outbox.Writer
	topic  string
}

func newStand(t *testing.T) *stand {
	t.Helper()
	pool := testkit.NewPool(t, outbox.Migrate, idempotent.Migrate, fundingprojection.Migrate)
	s := &stand{t: t, pool: pool, kafka: testkit.NewKafka(t), events: outbox.Writer{TopicPrefix: testkit.UniqueName(t, "projection") + "."}}
	s.topic = s.events.TopicPrefix + fundingprojection.Topic
	adm := s.kafka.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 2, -1, nil, s.topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("create topic %s: %v", s.topic, err)
	}
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), s.topic) })
	relay, err := publisher.New(publisher.Config{Pool: pool, Kafka: s.kafka.Config(), Shards: 2, Workers: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var mux idempotent.Mux
	fundingprojection.Register(&mux)
	runner, err := idempotent.NewRunner(idempotent.Config{Group: testkit.UniqueName(t, "funding-svc"), Topics: []string{s.topic},
		Pool: pool, Kafka: s.kafka.Config(), Handler: mux.Handle, Types: fundingprojection.Types, Outbox: s.events})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Background(t, relay.Run)
	testkit.Background(t, runner.Run)
	return s
}

// publish appends the events to the outbox in one transaction, as
// funding-svc's store does with its entries.
func (s *stand) publish(ps ...contract.Payload) {
	s.t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, p := range ps {
			if _, err := s.events.Append(ctx, tx, outbox.Event{Payload: p}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
}

// projected waits until account's projection has applied events events and
// returns it.
func (s *stand) projected(account string, events int64) fundingprojection.Balance {
	s.t.Helper()
	var b fundingprojection.Balance
	testkit.Eventually(s.t, within, fmt.Sprintf("account %s projects %d events", account, events), func() (err error) {
		b, err = fundingprojection.Read(context.Background(), s.pool, account, "USD")
		if err == nil && b.Events != events {
			err = fmt.Errorf("%d events applied, balance %d", b.Events, b.Balance)
		}
		return err
	})
	return b
}

// redeliver produces the topic's first record of account again, unchanged
// (same key, value and headers, so the same event id): what a relay that
// published a row twice, or a replay, delivers.
func (s *stand) redeliver(account string) {
	s.t.Helper()
	cl := s.kafka.Client(s.t, kgo.ConsumeTopics(s.topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			s.t.Fatalf("no record of account %s on %s: %v", account, s.topic, err)
		}
		var first *kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			if first == nil && string(r.Key) == account {
				first = r
			}
		})
		if first != nil {
			again := &kgo.Record{Topic: first.Topic, Key: first.Key, Value: first.Value, Headers: first.Headers}
			if err := cl.ProduceSync(ctx, again).FirstErr(); err != nil {
				s.t.Fatal(err)
			}
			return
		}
	}
}

func credited(account string, amount int64) contract.AccountCreditedV1 {
	return contract.AccountCreditedV1{AccountID: account, MovementID: "jnl-" + account, Amount: amount, Currency: "USD"}
}

// The projection is the sum of the account.* events, whichever way each
// moves the money, per account.
func TestTheProjectionIsTheSumOfTheEvents(t *testing.T) {
	s := newStand(t)
	a, b := testkit.UniqueName(t, "acct-a"), testkit.UniqueName(t, "acct-b")
	s.publish(credited(a, 10_000),
		contract.AccountDebitedV1{AccountID: a, PaymentID: "jnl-w1", Amount: 2_500, Currency: "USD"},
		credited(b, 700),
		contract.AccountDebitReversedV1{AccountID: a, MovementID: "jnl-w1", Amount: 2_500, Currency: "USD"},
		contract.AccountDebitedV1{AccountID: a, PaymentID: "ach-w2", Amount: 4_000, Currency: "USD"})
	s.publish(credited(b, 300))
	if got := s.projected(a, 4); got.Balance != 6_000 {
		t.Errorf("account a: projected %d, want 10000 - 2500 + 2500 - 4000 = 6000", got.Balance)
	}
	if got := s.projected(b, 2); got.Balance != 1_000 {
		t.Errorf("account b: projected %d, want 700 + 300 = 1000", got.Balance)
	}
}

// A record delivered again (same event id) changes nothing: the event it
// carries was applied once.
func TestARedeliveredEventChangesNothing(t *testing.T) {
	s := newStand(t)
	a := testkit.UniqueName(t, "acct")
	s.publish(credited(a, 5_000))
	if got := s.projected(a, 1); got.Balance != 5_000 {
		t.Fatalf("projected %d after the credit, want 5000", got.Balance)
	}
	s.redeliver(a)
	// One more event of the account, behind the redelivered record on the
	// same partition: once it is applied, the duplicate was handled.
	s.publish(contract.AccountDebitedV1{AccountID: a, PaymentID: "jnl-w", Amount: 1_000, Currency: "USD"})
	got := s.projected(a, 2)
	if got.Balance != 4_000 {
		t.Errorf("projected %d, want 5000 - 1000 = 4000 (the redelivered credit applied once)", got.Balance)
	}
	if n := testkit.Count(t, s.pool, `select count(*) from processed_events`); n != 2 {
		t.Errorf("%d processed events, want 2", n)
	}
}

// A reversal takes back what its movement did: a credit reversed lowers
// the balance, a debit reversed raises it.
func TestAReversalLowersTheBalance(t *testing.T) {
	s := newStand(t)
	a := testkit.UniqueName(t, "acct")
	s.publish(credited(a, 8_000))
	if got := s.projected(a, 1); got.Balance != 8_000 {
		t.Fatalf("projected %d after the credit, want 8000", got.Balance)
	}
	s.publish(contract.AccountCreditReversedV1{AccountID: a, MovementID: "jnl-" + a, Amount: 8_000, Currency: "USD"})
	if got := s.projected(a, 2); got.Balance != 0 {
		t.Errorf("projected %d after the credit was reversed, want 0", got.Balance)
	}
	s.publish(contract.AccountDebitedV1{AccountID: a, PaymentID: "ach-w", Amount: 300, Currency: "USD"},
		contract.AccountDebitReversedV1{AccountID: a, MovementID: "ach-w", Amount: 300, Currency: "USD"})
	if got := s.projected(a, 4); got.Balance != 0 {
		t.Errorf("projected %d after a debit and its reversal, want 0", got.Balance)
	}
}
