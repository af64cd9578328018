// Package publisher is the relay: it reads the transactional outbox
// (package outbox) and publishes its rows to Kafka at least once, in append
// order per partition key, marking a row published only after Kafka
// acknowledged it. Run it in-process with New(cfg).Run(ctx), or as the relay
// binary (relay/cmd/relay), which is a thin wrapper around this package.
//
// How a row travels:
//
//   - Wake-up: LISTEN on outbox.NotifyChannel (Append notifies on commit),
//     with a fallback poll, so a quiet relay answers in milliseconds without
//     a tight loop.
//   - Batch: rows of the shards this instance owns, in id order, locked with
//     FOR UPDATE SKIP LOCKED; rows of a key that has an earlier row failing
//     (in backoff or parked) are left out.
//   - Per-key guard (Sendable): a row is produced only if every earlier
//     pending row of its key is in the same batch. This holds whoever holds
//     the earlier rows, so order survives shard hand-overs and operators.
//   - Produce: franz-go, idempotent producer, acks=all; records of one key
//     go to one partition in id order. The relay waits for every answer.
//   - Settle: acknowledged rows are marked published in one statement; the
//     first failed row of a key backs off (attempts, last_error,
//     next_attempt_at) and later rows of that key stay pending. A row the
//     cluster refuses is parked after MaxAttempts; its key waits until an
//     operator retries or skips it (outbox.Retry, outbox.Skip).
//   - Shards: rows are sharded by outbox.KeyHash % Shards; each shard has one
//     owner at a time through a Postgres session advisory lock, and the
//     instances split the shards evenly. A dead instance's session ends, its
//     locks go with it, and the others take the shards on their next
//     rebalance tick (about a second).
package publisher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/infra/kit"
)

// Defaults of the Config fields left zero.
const (
	DefaultShards            = 64
	DefaultWorkers           = 2
	DefaultBatchSize         = 1000
	DefaultPollInterval      = time.Second
	DefaultRebalanceInterval = time.Second
	DefaultMaxAttempts       = 10
	DefaultBackoffMin        = 100 * time.Millisecond
	DefaultBackoffMax        = 30 * time.Second
	DefaultDeliveryTimeout   = 30 * time.Second
	DefaultMaxMessageBytes   = 1_000_012 // Kafka's default max.message.bytes
	DefaultRetention         = 24 * time.Hour
	DefaultCleanupInterval   = time.Minute
	DefaultCleanupBatch      = 1000
	DefaultMetricsInterval   = 5 * time.Second
	DefaultReadTimeout       = 5 * time.Second
)

// Config configures a Relay. Pool is required, and one of Kafka or Client.
type Config struct {
	Pool *pgxpool.Pool // the service database that holds the outbox

	// Kafka is the cluster to publish to; the relay builds its own client
	// (idempotent, acks=all, murmur2 key partitioner) from it.
	Kafka kit.KafkaConfig
	// Client, when set, is used instead of Kafka and not closed by the relay.
	// It must be idempotent with acks=all (franz-go's defaults), keep the
	// default key partitioner, and its ProducerBatchMaxBytes must not exceed
	// the smallest max.message.bytes of the topics, or a batch of small
	// records can be refused as a whole. Build it with ProducerOpts for the
	// relay's span per record (see publishTracing).
	Client *kgo.Client

	Logger     *slog.Logger          // slog.Default() when nil
	Registerer prometheus.Registerer // metrics are not registered when nil

	// Shards is the number of key-hash shards; every instance on one
	// outbox must use the same value. Default 64.
	Shards int
	// Workers is the number of concurrent batch pipelines per instance,
	// each over its own subset of the owned shards. A worker overlaps two
	// batches (one reading and producing, one waiting for its acks) when
	// Pool has at least PipelineConns(Workers) connections. Default 2.
	Workers int
	// BatchSize is the most rows one batch locks and produces. Default 1000.
	BatchSize int
	// ReadTimeout bounds a batch's read. A read that runs longer was
	// planned on statistics from before a backlog (a few rows where there
	// are now many): it is cancelled, the relay refreshes the outbox's
	// statistics (ANALYZE outbox) and reads again. Default 5s.
	ReadTimeout time.Duration
	// PollInterval is the fallback wake-up when no NOTIFY arrives. Default 1s.
	PollInterval time.Duration
	// RebalanceInterval is how often shard ownership is checked and
	// rebalanced; a dead instance's shards move within about this. Default 1s.
	RebalanceInterval time.Duration
	// MaxAttempts is how often the cluster may refuse a row before it is
	// parked; transient failures never park. <0 never parks. Default 10.
	MaxAttempts int
	// BackoffMin and BackoffMax bound the wait after a failure, doubling per
	// attempt. Defaults 100ms and 30s.
	BackoffMin, BackoffMax time.Duration
	// DeliveryTimeout bounds how long a record may wait for its ack (broker
	// down) before the batch gives up on it and backs off. Default 30s.
	DeliveryTimeout time.Duration
	// Linger is the producer's linger; 0 sends as soon as possible (batches
	// still form while a request is in flight). Default 0.
	Linger time.Duration
	// Compression: none, gzip, snappy, lz4 or zstd. Default none.
	Compression string
	// MaxMessageBytes caps a produce batch; each topic's own
	// max.message.bytes (read with kadm) lowers it. Default 1000012.
	MaxMessageBytes int
	// Retention is how long published rows are kept before cleanup deletes
	// them; <0 disables cleanup. Default 24h.
	Retention time.Duration
	// CleanupInterval and CleanupBatch pace the deletion. Defaults 1m, 1000.
	CleanupInterval time.Duration
	CleanupBatch    int
	// MetricsInterval is how often the backlog gauges are refreshed. Default 5s.
	MetricsInterval time.Duration
	// OnAck, when set, is called for every record Kafka acknowledged, with
	// the times the relay knows of it (benchmarks, diagnostics). It runs on
	// the producer's callback goroutine and must be quick.
	OnAck func(Ack)
}

// Ack is a record Kafka acknowledged and the times the relay knows of it:
// where a row's commit-to-ack went.
type Ack struct {
	EventID string
	// Inserted is the row's created_at: when the transaction that appended
	// it inserted it (clock_timestamp()).
	Inserted time.Time
	// Committed is that transaction's commit time, as the replication
	// stream gives it (the database server's clock). Zero in poll mode,
	// which never learns it.
	Committed time.Time
	// Read is when the relay read the row: its batch's query answered (poll
	// mode), or its transaction began to arrive from the stream (WAL mode).
	Read  time.Time
	Acked time.Time
}

func (c *Config) setDefaults() error {
	if c.Pool == nil {
		return errors.New("relay: Config.Pool is required")
	}
	if c.Client == nil && len(c.Kafka.Brokers) == 0 {
		return errors.New("relay: Config.Kafka.Brokers or Config.Client is required")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Shards, DefaultShards)
	def(&c.Workers, DefaultWorkers)
	def(&c.BatchSize, DefaultBatchSize)
	def(&c.MaxMessageBytes, DefaultMaxMessageBytes)
	def(&c.CleanupBatch, DefaultCleanupBatch)
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	defD(&c.PollInterval, DefaultPollInterval)
	defD(&c.RebalanceInterval, DefaultRebalanceInterval)
	defD(&c.BackoffMin, DefaultBackoffMin)
	defD(&c.BackoffMax, DefaultBackoffMax)
	defD(&c.DeliveryTimeout, DefaultDeliveryTimeout)
	defD(&c.ReadTimeout, DefaultReadTimeout)
	defD(&c.CleanupInterval, DefaultCleanupInterval)
	defD(&c.MetricsInterval, DefaultMetricsInterval)
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.Workers > c.Shards {
		c.Workers = c.Shards
	}
	if c.BackoffMax < c.BackoffMin {
		return fmt.Errorf("relay: backoff max %s is below backoff min %s", c.BackoffMax, c.BackoffMin)
	}
	if c.Linger < 0 {
		return fmt.Errorf("relay: linger %s is negative", c.Linger)
	}
	if _, err := compressionCodec(c.Compression); err != nil {
		return err
	}
	return nil
}

func compressionCodec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "", "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("relay: compression %q: want none, gzip, snappy, lz4 or zstd", name)
}

// Relay publishes one database's outbox. Create it with New; Run it once.
type Relay struct {
	cfg     Config
	log     *slog.Logger
	m       *metrics
	limits  topicLimits
	owner   *owner
	mu      sync.Mutex
	client  *kgo.Client
	adm     *kadm.Client
	wakeups []chan struct{}
	stats   statsRefresh
	// pipelined says whether a worker overlaps its batches (two open
	// transactions at a time); see PipelineConns.
	pipelined bool
}

// PipelineConns is the smallest pool (MaxConns) with which workers overlap
// their batches: each worker then holds two connections at a time, plus one
// for the backlog gauges and cleanup. With a smaller pool every worker runs
// one batch at a time, as two half-served workers could otherwise wait on
// each other's connections for ever.
func PipelineConns(workers int) int { return 2*workers + 1 }

// New checks cfg and fills its defaults. It connects to nothing yet.
func New(cfg Config) (*Relay, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	r := &Relay{cfg: cfg, log: cfg.Logger, m: newMetrics(cfg.Registerer)}
	r.pipelined = int(cfg.Pool.Config().MaxConns) >= PipelineConns(cfg.Workers)
	r.owner = newOwner(cfg.Pool, cfg.Shards, cfg.RebalanceInterval, r.log, r.m)
	for range cfg.Workers {
		r.wakeups = append(r.wakeups, make(chan struct{}, 1))
	}
	return r, nil
}

// ProducerOpts are the franz-go options the relay's own client uses beyond
// the connection: idempotent (franz-go's default), acks=all, Kafka's murmur2
// key partitioner, compression, linger, the delivery timeout, and a batch
// cap lowered per topic to its max.message.bytes by lookup, and the span of
// each record whose outbox row carries a trace (see publishTracing).
func ProducerOpts(cfg Config, lookup func(topic string) (int32, bool)) []kgo.Opt {
	codec, _ := compressionCodec(cfg.Compression)
	max := int32(cfg.MaxMessageBytes)
	if max <= 0 {
		max = DefaultMaxMessageBytes
	}
	return []kgo.Opt{
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.WithHooks(publishTracing{}),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.ProducerBatchCompression(codec),
		kgo.ProducerLinger(cfg.Linger),
		kgo.RecordDeliveryTimeout(cfg.DeliveryTimeout),
		kgo.MaxBufferedRecords(max64(4*cfg.BatchSize*cfg.Workers, 10_000)),
		kgo.ProducerBatchMaxBytesFn(func(topic string) int32 {
			if l, ok := lookup(topic); ok && l < max {
				return l
			}
			return max
		}),
	}
}

func max64(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// Run publishes until ctx is done, then finishes the batches in flight
// (waits for their acks and marks them), releases its shards and returns.
// Database and broker outages are logged and retried, never returned.
func (r *Relay) Run(ctx context.Context) error {
	cl := r.cfg.Client
	if cl == nil {
		var err error
		opts := append(ProducerOpts(r.cfg, r.limits.get), kit.KafkaMetrics(r.cfg.Registerer, "relay", nil))
		cl, err = kit.NewKafkaClient(ctx, r.cfg.Kafka, r.log, opts...)
		if err != nil {
			return err
		}
		defer cl.Close()
	}
	r.mu.Lock()
	r.client, r.adm = cl, kadm.NewClient(cl)
	r.mu.Unlock()

	// The owner outlives the workers: shards are released only after the
	// last batch committed.
	ownerCtx, stopOwner := context.WithCancel(context.WithoutCancel(ctx))
	var ownerWG sync.WaitGroup
	ownerWG.Add(1)
	go func() { defer ownerWG.Done(); r.owner.run(ownerCtx, r.wakeAll) }()

	var wg sync.WaitGroup
	for i := range r.cfg.Workers {
		wg.Add(1)
		go func() { defer wg.Done(); r.runWorker(ctx, i) }()
	}
	wg.Add(3)
	go func() { defer wg.Done(); r.listen(ctx) }()
	go func() { defer wg.Done(); r.cleanupLoop(ctx) }()
	go func() { defer wg.Done(); r.metricsLoop(ctx) }()
	r.log.Info("relay running", "shards", r.cfg.Shards, "workers", r.cfg.Workers, "batch", r.cfg.BatchSize,
		"pipelined", r.pipelined, "pool_max_conns", r.cfg.Pool.Config().MaxConns, "linger", r.cfg.Linger.String())
	<-ctx.Done()
	wg.Wait()
	stopOwner()
	ownerWG.Wait()
	r.log.Info("relay stopped: in-flight batches drained, shards released")
	return nil
}

// Ready reports whether the relay can work now: it owns its share of the
// shards (so it reached the database) and Kafka answers.
func (r *Relay) Ready(ctx context.Context) error {
	if err := r.cfg.Pool.Ping(ctx); err != nil {
		return fmt.Errorf("database: %w", err)
	}
	if !r.owner.connected() {
		return errors.New("shard ownership: not connected")
	}
	r.mu.Lock()
	cl := r.client
	r.mu.Unlock()
	if cl == nil {
		return errors.New("kafka: not connected yet")
	}
	if err := cl.Ping(ctx); err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	return nil
}

// OwnedShards lists the shards this instance owns now.
func (r *Relay) OwnedShards() []int { return r.owner.shards() }

func (r *Relay) wakeAll() {
	for i := range r.wakeups {
		r.wake(i)
	}
}

// wakeFor wakes the worker reading the shard of a notification's key hash
// (outbox.NotifyChannel's payload), or every worker when the payload names
// none. A shard this instance does not own wakes nothing here: its owner
// got the same notification. A worker woken for nothing reads the outbox
// for nothing, a transaction of five statements: waking every worker
// would cost a single-row commit one such read per other worker.
func (r *Relay) wakeFor(payload string) {
	h, err := strconv.ParseInt(payload, 10, 32)
	if err != nil || h < 0 {
		r.wakeAll()
		return
	}
	if i, ok := r.owner.workerOf(int(h)%r.cfg.Shards, r.cfg.Workers); ok {
		r.wake(i)
	}
}

// wake wakes worker i, or leaves its pending wake-up as it is.
func (r *Relay) wake(i int) {
	select {
	case r.wakeups[i] <- struct{}{}:
	default:
	}
}

// woken takes worker i's pending wake-up, if any, without waiting.
func (r *Relay) woken(i int) bool {
	select {
	case <-r.wakeups[i]:
		return true
	default:
		return false
	}
}

// sleep waits for d, a wake-up of worker i (i < 0: none) or ctx.
func (r *Relay) sleep(ctx context.Context, i int, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	var wake chan struct{}
	if i >= 0 {
		wake = r.wakeups[i]
	}
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-wake:
	}
}
