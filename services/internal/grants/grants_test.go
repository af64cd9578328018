package grants_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/relay/publisher"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/internal/grants"
)

// deployment is the services' principals provisioned under a fresh prefix
// on the shared (authenticated) cluster, with every topic they name.
type deployment struct {
	k      *testkit.Kafka
	prefix string
	creds  map[string]grants.Credential
	topics []string // every topic some service reads or writes, prefixed
}

func provision(t *testing.T) *deployment {
	t.Helper()
	k := testkit.NewKafka(t)
	if k.Config().SASLMechanism == "" {
		if testkit.InCI() {
			t.Fatal("the shared Kafka has no SASL: make test runs against the stack's authenticated listener (infra/local/up)")
		}
		t.Skip("needs an authenticated cluster (CONCORD_KAFKA_SASL_MECHANISM); infra/local/up starts one")
	}
	d := &deployment{k: k, prefix: testkit.UniqueName(t, "grants") + "."}
	adm := k.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	creds, err := grants.Provision(ctx, adm, d.prefix)
	if err != nil {
		t.Fatal(err)
	}
	d.creds = creds
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := grants.Revoke(ctx, adm, d.prefix); err != nil {
			t.Errorf("revoke: %v", err)
		}
	})
	for _, s := range grants.Services {
		for _, tp := range append(slices.Clone(s.Reads), s.Writes...) {
			d.topics = append(d.topics, d.prefix+tp)
		}
	}
	slices.Sort(d.topics)
	d.topics = slices.Compact(d.topics)
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, d.topics...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopics(ctx, d.topics...)
	})
	return d
}

// as is the shared cluster reached as service's principal.
func (d *deployment) as(service string) *testkit.Kafka {
	c := d.creds[service]
	return d.k.As(c.User, c.Password)
}

func (d *deployment) client(t *testing.T, service string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return d.as(service).Client(t, opts...)
}

func TestEachPrincipalWritesOnlyTheTopicsItsServiceProduces(t *testing.T) {
	d := provision(t)
	for _, s := range grants.Services {
		cl := d.client(t, s.Name, kgo.ProducerLinger(0))
		for _, topic := range d.topics {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("probe")}).FirstErr()
			cancel()
			owns := slices.Contains(s.Writes, topic[len(d.prefix):])
			switch {
			case owns && err != nil:
				t.Errorf("%s may write %s but was refused: %v", s.Name, topic, err)
			case !owns && !errors.Is(err, kerr.TopicAuthorizationFailed):
				t.Errorf("%s wrote %s, which it does not own: want TOPIC_AUTHORIZATION_FAILED, got %v", s.Name, topic, err)
			}
		}
	}
}

func TestEachPrincipalReadsOnlyWhatItConsumesInItsOwnGroup(t *testing.T) {
	d := provision(t)
	for _, s := range grants.Services {
		adm := kadm.NewClient(d.client(t, s.Name))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		for _, topic := range d.topics {
			name := topic[len(d.prefix):]
			may := slices.Contains(s.Reads, name) || slices.Contains(s.Writes, name)
			_, err := adm.ListStartOffsets(ctx, topic)
			switch {
			case may && err != nil:
				t.Errorf("%s may describe %s but was refused: %v", s.Name, topic, err)
			case !may && !errors.Is(err, kerr.TopicAuthorizationFailed):
				t.Errorf("%s described %s: want TOPIC_AUTHORIZATION_FAILED, got %v", s.Name, topic, err)
			}
		}
		// Committing offsets is what a member of a group does: its own
		// group only.
		// (On a topic it may describe: a client asks about no other.)
		commit := kadm.Offsets{}
		commit.Add(kadm.Offset{Topic: d.prefix + append(slices.Clone(s.Reads), s.Writes...)[0], Partition: 0, At: 0})
		if len(s.Reads) > 0 {
			if err := adm.CommitAllOffsets(ctx, d.prefix+s.Name, commit); err != nil {
				t.Errorf("%s commits in its own group: %v", s.Name, err)
			}
		}
		other := grants.Services[(slices.IndexFunc(grants.Services, func(o grants.Service) bool { return o.Name == s.Name })+1)%len(grants.Services)]
		if err := adm.CommitAllOffsets(ctx, d.prefix+other.Name, commit); !errors.Is(err, kerr.GroupAuthorizationFailed) {
			t.Errorf("%s committed in %s's group: want GROUP_AUTHORIZATION_FAILED, got %v", s.Name, other.Name, err)
		}
		// A fetch of a topic it neither reads nor writes is refused.
		for _, topic := range d.topics {
			name := topic[len(d.prefix):]
			if slices.Contains(s.Reads, name) || slices.Contains(s.Writes, name) {
				continue
			}
			cl := d.client(t, s.Name, kgo.ConsumeTopics(topic))
			fs := cl.PollFetches(ctx)
			if err := fs.Err(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
				t.Errorf("%s fetched %s: want TOPIC_AUTHORIZATION_FAILED, got %v", s.Name, topic, err)
			}
			cl.Close()
			break
		}
		cancel()
	}
}

func TestAWrongPasswordIsRefused(t *testing.T) {
	d := provision(t)
	cfg := d.as("order-svc").Config()
	cfg.SASLPassword += "x"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kit.NewKafkaClient(ctx, cfg, nil)
	if err == nil {
		cl.Close()
		t.Fatal("a wrong password connected")
	}
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("want SASL_AUTHENTICATION_FAILED, got %v", err)
	}
}

// The relay publishes with its service's principal: a row its service
// does not own (an inventory-svc database holding an order.created, as a
// bug or an intruder would write it) is refused by the broker and parked;
// the service's own events go out.
func TestTheRelayPublishesOnlyWhatItsServiceOwnsAndParksTheRest(t *testing.T) {
	d := provision(t)
	pool := testkit.NewPool(t, outbox.Migrate)
	w := outbox.Writer{TopicPrefix: d.prefix}
	reserved := example[contract.InventoryReservedV2](t, "inventory.reserved", "v2-basic.json")
	created := example[contract.OrderCreatedV3](t, "order.created", "v3-basic.json")
	// Another order: a key behind a parked row waits (order wins).
	reserved.OrderID = "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d99"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := w.Append(ctx, tx, outbox.Event{Payload: created})
	if err != nil {
		t.Fatal(err)
	}
	own, err := w.Append(ctx, tx, outbox.Event{Payload: reserved})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := publisher.New(publisher.Config{Pool: pool, Kafka: d.as("inventory-svc").Config(), MaxAttempts: 2,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	t.Cleanup(func() { stop(); <-done })

	testkit.Eventually(t, 60*time.Second, "the forged row parked and the own row published", func() error {
		var parked, published bool
		if err := pool.QueryRow(ctx, `select parked_at is not null from outbox where event_id = $1`, forged.EventID).Scan(&parked); err != nil {
			return err
		}
		if err := pool.QueryRow(ctx, `select published_at is not null from outbox where event_id = $1`, own.EventID).Scan(&published); err != nil {
			return err
		}
		if !parked || !published {
			return errors.New("not yet")
		}
		return nil
	})
	// Nothing reached the topic the service does not own.
	offs, err := d.k.Admin(t).ListEndOffsets(ctx, d.prefix+created.EventType().Topic())
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offs.Lookup(d.prefix+created.EventType().Topic(), 0); o.Offset != 0 {
		t.Fatalf("%d records on %s", o.Offset, d.prefix+created.EventType().Topic())
	}
}

func example[T contract.Payload](t *testing.T, eventType, file string) T {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "schemas", "events", eventType, "examples", file))
	if err != nil {
		t.Fatal(err)
	}
	env, err := schemas.DecodeEnvelope(b)
	if err != nil {
		t.Fatal(err)
	}
	p, err := contract.Decode[T](env)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The local stack's plaintext listener (infra/local/up) is for tools that
// look: its User:ANONYMOUS reads topics and describes groups, and nothing
// else, so the door without a password cannot write an event, create a
// topic or move a consumer group.
func TestThePlaintextListenerOnlyReads(t *testing.T) {
	plain := os.Getenv("CONCORD_KAFKA_PLAINTEXT_BROKERS")
	if plain == "" {
		if testkit.InCI() && os.Getenv("CONCORD_KAFKA_COMMAND_CONFIG") != "" {
			t.Fatal("the stack's authenticated listener is in use but CONCORD_KAFKA_PLAINTEXT_BROKERS is not set")
		}
		t.Skip("not the local stack's broker: no read-only plaintext listener (CONCORD_KAFKA_PLAINTEXT_BROKERS)")
	}
	k := testkit.NewKafka(t)
	topic := k.CreateTopic(t, "plaintext", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := k.Client(t).ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("written by the admin")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	anon := &testkit.Kafka{Brokers: kit.SplitBrokers(plain), Kind: "plaintext"}
	reader := anon.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := reader.PollFetches(ctx)
	if err := fs.Err(); err != nil || fs.NumRecords() != 1 {
		t.Fatalf("anonymous read: %d records, %v", fs.NumRecords(), err)
	}
	// Not idempotent: such a producer asks for a producer id first, which
	// is refused at the cluster level before any topic is named.
	writer := anon.Client(t, kgo.ProducerLinger(0), kgo.DisableIdempotentWrite())
	if err := writer.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("forged")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("anonymous write: want TOPIC_AUTHORIZATION_FAILED, got %v", err)
	}
	adm := kadm.NewClient(writer)
	commit := kadm.Offsets{}
	commit.Add(kadm.Offset{Topic: topic, Partition: 0, At: 0})
	if err := adm.CommitAllOffsets(ctx, testkit.UniqueName(t, "g"), commit); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Errorf("anonymous offset commit: want GROUP_AUTHORIZATION_FAILED, got %v", err)
	}
	resp, err := adm.CreateTopic(ctx, 1, 1, nil, testkit.UniqueName(t, "anon"))
	if err == nil {
		err = resp.Err
	}
	if !errors.Is(err, kerr.TopicAuthorizationFailed) && !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("anonymous topic creation: want an authorization failure, got %v", err)
	}
}
