// Command watermill-peer measures the outbox a Go user would most likely
// pick instead of Concord's relay: Watermill's forwarder, reading
// watermill-sql's PostgreSQL table and publishing with watermill-kafka, on
// the same broker and database as relay-bench, with the same figures
// (backlog drain in events/s, commit-to-ack p50/p99 at a fixed offered
// load, peak RSS). `make bench-relay` runs it right after relay-bench.
//
// It is a module of its own, outside the workspace, so Watermill and Sarama
// never enter Concord's build. It reads the stack's CONCORD_* variables
// (.local/stack.env): the admin PostgreSQL URL, the brokers, TLS and SASL.
//
// The forwarder is configured as its documentation suggests for speed: the
// SQL subscriber reads 100 rows per query and polls every 10 ms when idle
// (its default is 1 s, which would dominate the latency figure). Acks are
// from all in-sync replicas with Sarama's idempotent producer, as Concord's
// relay produces.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// keyMetadata carries a message's partition key through the envelope to
// the Kafka publisher's marshaler.
const keyMetadata = "partition_key"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "watermill-peer:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	events := flag.Int("events", 20_000, "events in the backlog drain")
	payload := flag.Int("payload", 1024, "approximate payload size in bytes")
	keys := flag.Int("keys", 10_000, "distinct partition keys")
	partitions := flag.Int("partitions", 6, "partitions of the scratch topic")
	rate := flag.Int("rate", 2000, "offered load of the latency run, events/s")
	rateFor := flag.Duration("rate-duration", 15*time.Second, "length of the latency run")
	flag.Parse()
	admin := os.Getenv("CONCORD_POSTGRES_URL")
	if admin == "" {
		return fmt.Errorf("CONCORD_POSTGRES_URL is not set (source .local/stack.env, or run make bench-relay)")
	}

	dbURL, drop, err := scratchDatabase(ctx, admin)
	if err != nil {
		return err
	}
	defer drop()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()

	scfg, err := saramaConfig()
	if err != nil {
		return err
	}
	brokers := strings.Split(os.Getenv("CONCORD_KAFKA_BROKERS"), ",")
	topic := "watermill-peer-" + randomHex(4)
	if err := createTopic(brokers, scfg, topic, int32(*partitions)); err != nil {
		return err
	}
	defer deleteTopic(brokers, scfg, topic)

	fmt.Printf("watermill-peer: Watermill %s forwarder (watermill-sql v4 on PostgreSQL → watermill-kafka v3), %d events, ~%d B payloads, %d keys, topic %s (%d partitions)\n",
		"v1.5.1", *events, *payload, *keys, topic, *partitions)
	fmt.Printf("  load average at start: %s\n", loadAverage())
	defer func() { fmt.Printf("  load average at end:   %s\n", loadAverage()) }()

	logger := watermill.NopLogger{}
	schema := wsql.DefaultPostgreSQLSchema{SubscribeBatchSize: 100}
	body := payloadOf(*payload)

	// Backlog: every row in the table before the forwarder starts.
	resetPeakRSS()
	const backlogTopic = "outbox_backlog"
	if err := initializeSchema(pool, schema, logger, backlogTopic); err != nil {
		return err
	}
	if err := appendMessages(ctx, pool, schema, logger, backlogTopic, topic, *events, *keys, body, 1000, nil); err != nil {
		return err
	}
	acks := newAckLog()
	start := time.Now()
	fw, err := startForwarder(ctx, pool, scfg, brokers, schema, logger, backlogTopic, acks)
	if err != nil {
		return err
	}
	if err := acks.waitFor(ctx, *events, 10*time.Minute); err != nil {
		fw.stop()
		return err
	}
	drained := time.Since(start)
	fw.stop()
	fmt.Printf("  watermill        backlog drained:                             %9.0f events/s\n", float64(*events)/drained.Seconds())

	// Latency: one event per transaction at the offered rate.
	const latencyTopic = "outbox_latency"
	if err := initializeSchema(pool, schema, logger, latencyTopic); err != nil {
		return err
	}
	acks = newAckLog()
	fw, err = startForwarder(ctx, pool, scfg, brokers, schema, logger, latencyTopic, acks)
	if err != nil {
		return err
	}
	defer fw.stop()
	// Eight appenders, as relay-bench's latency run uses, each event its
	// own transaction, paced to the offered rate.
	var mu sync.Mutex
	committed := map[string]time.Time{}
	n := int(float64(*rate) * rateFor.Seconds())
	jobs := make(chan struct{}, n)
	errc := make(chan error, 8)
	var appenders sync.WaitGroup
	for range 8 {
		appenders.Add(1)
		go func() {
			defer appenders.Done()
			for range jobs {
				err := appendMessages(ctx, pool, schema, logger, latencyTopic, topic, 1, *keys, body, 1, func(id string, at time.Time) {
					mu.Lock()
					committed[id] = at
					mu.Unlock()
				})
				if err != nil {
					select {
					case errc <- err:
					default:
					}
				}
			}
		}()
	}
	interval := time.Second / time.Duration(*rate)
	paceStart := time.Now()
	for i := range n {
		if wait := time.Until(paceStart.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait) // pacing the offered load
		}
		jobs <- struct{}{}
	}
	close(jobs)
	appenders.Wait()
	offeredFor := time.Since(paceStart)
	select {
	case err := <-errc:
		return err
	default:
	}
	waitErr := acks.waitFor(ctx, n, 2*time.Minute)
	lat := acks.latencies(committed)
	fmt.Printf("  watermill        commit-to-ack at %d events/s offered (%d offered in %s, %d acknowledged): p50 %s  p99 %s\n",
		*rate, n, offeredFor.Round(time.Millisecond), len(lat), percentile(lat, 50).Round(100*time.Microsecond), percentile(lat, 99).Round(100*time.Microsecond))
	if waitErr != nil {
		fmt.Printf("  watermill        (%v: the forwarder fell behind the offered load)\n", waitErr)
	}
	fmt.Printf("  watermill        peak RSS of this process (forwarder, load and bookkeeping): %.0f MiB\n", float64(peakRSS())/(1<<20))
	return nil
}

// forwarderRun is a running forwarder.
type forwarderRun struct {
	fw   *forwarder.Forwarder
	done chan struct{}
}

func (f forwarderRun) stop() {
	_ = f.fw.Close()
	<-f.done
}

// startForwarder runs Watermill's forwarder on the SQL topic: it reads
// the enveloped messages with watermill-sql's subscriber and publishes each
// to its destination with watermill-kafka's synchronous publisher, which
// returns once the broker acknowledged it; acks records that moment.
func startForwarder(ctx context.Context, pool *pgxpool.Pool, scfg *sarama.Config, brokers []string, schema wsql.DefaultPostgreSQLSchema,
	logger watermill.LoggerAdapter, sqlTopic string, acks *ackLog) (forwarderRun, error) {
	sub, err := wsql.NewSubscriber(wsql.BeginnerFromPgx(pool), wsql.SubscriberConfig{
		ConsumerGroup: "forwarder", SchemaAdapter: schema, OffsetsAdapter: wsql.DefaultPostgreSQLOffsetsAdapter{},
		PollInterval: 10 * time.Millisecond, InitializeSchema: true,
	}, logger)
	if err != nil {
		return forwarderRun{}, err
	}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{
		Brokers: brokers, OverwriteSaramaConfig: scfg,
		Marshaler: kafka.NewWithPartitioningMarshaler(func(_ string, m *message.Message) (string, error) {
			return m.Metadata.Get(keyMetadata), nil
		}),
	}, logger)
	if err != nil {
		return forwarderRun{}, err
	}
	fw, err := forwarder.NewForwarder(sub, ackingPublisher{pub, acks}, logger, forwarder.Config{ForwarderTopic: sqlTopic})
	if err != nil {
		return forwarderRun{}, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = fw.Run(ctx)
		_ = pub.Close()
		_ = sub.Close()
	}()
	select {
	case <-fw.Running():
	case <-done:
		return forwarderRun{}, fmt.Errorf("the forwarder stopped while starting")
	}
	return forwarderRun{fw, done}, nil
}

// ackingPublisher notes when each message's synchronous publish returned:
// the broker's acknowledgement.
type ackingPublisher struct {
	message.Publisher
	acks *ackLog
}

func (p ackingPublisher) Publish(topic string, msgs ...*message.Message) error {
	if err := p.Publisher.Publish(topic, msgs...); err != nil {
		return err
	}
	now := time.Now()
	for _, m := range msgs {
		p.acks.add(m.UUID, now)
	}
	return nil
}

// ackLog is the acknowledgement time of each message, by id.
type ackLog struct {
	mu sync.Mutex
	at map[string]time.Time
}

func newAckLog() *ackLog { return &ackLog{at: map[string]time.Time{}} }

func (a *ackLog) add(id string, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, seen := a.at[id]; !seen { // a redelivery keeps the first ack
		a.at[id] = at
	}
}

func (a *ackLog) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.at)
}

// waitFor polls until n distinct messages were acknowledged.
func (a *ackLog) waitFor(ctx context.Context, n int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for a.count() < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d acknowledged after %s", a.count(), n, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond): // poll interval
		}
	}
	return nil
}

func (a *ackLog) latencies(committed map[string]time.Time) []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	var lat []time.Duration
	for id, c := range committed {
		if acked, ok := a.at[id]; ok {
			lat = append(lat, acked.Sub(c))
		}
	}
	slices.Sort(lat)
	return lat
}

// appendMessages writes n messages to the SQL outbox topic through
// Watermill's forwarder publisher inside transactions of perTx messages,
// as an application would, and reports each message's commit time.
func appendMessages(ctx context.Context, pool *pgxpool.Pool, schema wsql.DefaultPostgreSQLSchema, logger watermill.LoggerAdapter,
	sqlTopic, kafkaTopic string, n, keys int, body []byte, perTx int, onCommit func(id string, at time.Time)) error {
	for i := 0; i < n; i += perTx {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		pub, err := wsql.NewPublisher(wsql.TxFromPgx(tx), wsql.PublisherConfig{SchemaAdapter: schema}, logger)
		if err != nil {
			_ = tx.Rollback(ctx)
			return err
		}
		fwd := forwarder.NewPublisher(pub, forwarder.PublisherConfig{ForwarderTopic: sqlTopic})
		var ids []string
		for j := i; j < min(i+perTx, n); j++ {
			m := message.NewMessage(watermill.NewUUID(), body)
			m.Metadata.Set(keyMetadata, fmt.Sprintf("key-%d", randomKey(keys)))
			if err := fwd.Publish(kafkaTopic, m); err != nil {
				_ = tx.Rollback(ctx)
				return fmt.Errorf("publish to the SQL outbox: %w", err)
			}
			ids = append(ids, m.UUID)
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		if onCommit != nil {
			now := time.Now()
			for _, id := range ids {
				onCommit(id, now)
			}
		}
	}
	return nil
}

// initializeSchema creates the SQL topic's tables (messages and the
// subscriber's offsets) before the first transaction writes to it: a
// publisher inside a transaction may not, since CREATE TABLE there would
// commit the application's transaction.
func initializeSchema(pool *pgxpool.Pool, schema wsql.DefaultPostgreSQLSchema, logger watermill.LoggerAdapter, sqlTopic string) error {
	sub, err := wsql.NewSubscriber(wsql.BeginnerFromPgx(pool), wsql.SubscriberConfig{
		ConsumerGroup: "forwarder", SchemaAdapter: schema, OffsetsAdapter: wsql.DefaultPostgreSQLOffsetsAdapter{}, InitializeSchema: true,
	}, logger)
	if err != nil {
		return err
	}
	defer sub.Close()
	return sub.SubscribeInitialize(sqlTopic)
}

func payloadOf(size int) []byte {
	return []byte(`{"note":"` + strings.Repeat("x", max(size-12, 0)) + `"}`)
}

func scratchDatabase(ctx context.Context, admin string) (string, func(), error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(ctx)
	name := "watermill_peer_" + randomHex(4)
	if _, err := conn.Exec(ctx, "create database "+name); err != nil {
		return "", nil, err
	}
	u, err := url.Parse(admin)
	if err != nil {
		return "", nil, err
	}
	u.Path = "/" + name
	return u.String(), func() {
		c, err := pgx.Connect(context.Background(), admin)
		if err == nil {
			_, _ = c.Exec(context.Background(), "drop database if exists "+name+" with (force)")
			c.Close(context.Background())
		}
	}, nil
}

func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func randomKey(keys int) int {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return int(uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3])) % keys
}

// kafkaDefaults is watermill-kafka's own default for a synchronous publisher.
func kafkaDefaults() *sarama.Config { return kafka.DefaultSaramaSyncPublisherConfig() }

// resetPeakRSS and peakRSS read this process's high-water mark of resident
// memory (Linux's clear_refs "5" resets it), so the figure is the peer's
// run, not the set-up before it.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kib int64
			fmt.Sscan(strings.TrimSpace(rest), &kib)
			return kib * 1024
		}
	}
	return 0
}
