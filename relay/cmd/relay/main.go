// Command relay publishes a service database's transactional outbox to
// Kafka (see package publisher), and lets an operator look at and release
// parked rows:
//
//	relay [flags]                     run the relay
//	relay outbox parked [flags]       list parked rows
//	relay outbox retry ID [flags]     retry a parked row from zero attempts
//	relay outbox skip ID --reason R   never publish a parked row; its key flows again
package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/relay/publisher"
	"github.com/concordhq/concord/schemas"
)

func main() { kit.Main("relay", run) }

const summary = `relay — publishes the transactional outbox of one service database to Kafka:
at least once, in append order per partition key, a row marked published only
after Kafka acknowledged it. Run as many instances as you like on one database:
they split the key-hash shards between them (Postgres advisory locks) and take
over a dead instance's shards within about --rebalance-interval.

Operator commands (same --database-url flag / DATABASE_URL):
  relay outbox parked             list parked rows and how many rows wait behind each
  relay outbox retry ID           retry a parked row (attempts start from zero)
  relay outbox skip ID --reason R never publish a parked row; the rows behind it go`

func run(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "outbox" {
		return runOutbox(ctx, args[1:], os.Stdout)
	}
	fs := kit.NewFlagSet("relay", summary)
	fs.AddCommand("outbox", "parked | retry ID | skip ID --reason R: look at and release parked outbox rows")
	dbURL := fs.String("database-url", "DATABASE_URL", "", "PostgreSQL URL of the service database holding the outbox (required)")
	kf := kit.AddKafkaFlags(fs)
	lf := kit.AddLogFlags(fs)
	httpAddr := fs.String("http-addr", "RELAY_HTTP_ADDR", ":9400", "address of /metrics, /healthz and /readyz")
	migrate := fs.Bool("migrate", "RELAY_MIGRATE", true, "create or upgrade the outbox table at start-up")
	shards := fs.Int("shards", "RELAY_SHARDS", publisher.DefaultShards, "key-hash shards; every instance on one outbox must use the same value")
	workers := fs.Int("workers", "RELAY_WORKERS", publisher.DefaultWorkers, "concurrent batch pipelines per instance, each over its own owned shards; each overlaps two batches, so the pool gets 2×workers+2 connections unless --database-url sets pool_max_conns")
	batch := fs.Int("batch-size", "RELAY_BATCH_SIZE", publisher.DefaultBatchSize, "most rows locked and produced per batch")
	readTimeout := fs.Duration("read-timeout", "RELAY_READ_TIMEOUT", publisher.DefaultReadTimeout, "how long a batch's read may run; a longer one was planned on statistics from before a backlog: it is cancelled, the outbox analyzed and the read tried again")
	poll := fs.Duration("poll-interval", "RELAY_POLL_INTERVAL", publisher.DefaultPollInterval, "fallback poll when no NOTIFY arrives (NOTIFY wakes the relay at once)")
	rebalance := fs.Duration("rebalance-interval", "RELAY_REBALANCE_INTERVAL", publisher.DefaultRebalanceInterval, "how often shard ownership is checked; a dead instance's shards move within about this")
	maxAttempts := fs.Int("max-attempts", "RELAY_MAX_ATTEMPTS", publisher.DefaultMaxAttempts, "refusals by the cluster before a row is parked (transient failures never park; -1 never parks)")
	backoffMin := fs.Duration("backoff-min", "RELAY_BACKOFF_MIN", publisher.DefaultBackoffMin, "wait after a row's first failure; doubles per attempt")
	backoffMax := fs.Duration("backoff-max", "RELAY_BACKOFF_MAX", publisher.DefaultBackoffMax, "longest wait between attempts of a row")
	delivery := fs.Duration("delivery-timeout", "RELAY_DELIVERY_TIMEOUT", publisher.DefaultDeliveryTimeout, "how long a record may wait for its ack (broker down) before the row backs off")
	linger := fs.Duration("linger", "RELAY_LINGER", 0, "producer linger: how long a partition's records wait to share a produce request; 0 sends at once (batches still form while a request is in flight). Default 0 with --mode poll, "+publisher.DefaultWALLinger.String()+" with --mode wal")
	compression := fs.String("compression", "RELAY_COMPRESSION", "none", "record batch compression: none, gzip, snappy, lz4 or zstd")
	maxBytes := fs.Int("max-message-bytes", "RELAY_MAX_MESSAGE_BYTES", publisher.DefaultMaxMessageBytes, "cap of a produce batch; each topic's max.message.bytes lowers it")
	retention := fs.Duration("retention", "RELAY_RETENTION", publisher.DefaultRetention, "published rows older than this are deleted; negative keeps them (--mode wal deletes a row once Kafka acknowledged it)")
	cleanupEvery := fs.Duration("cleanup-interval", "RELAY_CLEANUP_INTERVAL", publisher.DefaultCleanupInterval, "how often old published rows are deleted (by the owner of shard 0)")
	cleanupBatch := fs.Int("cleanup-batch", "RELAY_CLEANUP_BATCH", publisher.DefaultCleanupBatch, "rows deleted per cleanup statement")
	metricsEvery := fs.Duration("metrics-interval", "RELAY_METRICS_INTERVAL", publisher.DefaultMetricsInterval, "how often the backlog gauges (backlog rows, oldest age, parked rows) are read from the outbox")
	createTopics := fs.Bool("create-topics", "RELAY_CREATE_TOPICS", false, "create the missing topics of --topics with kadm at start-up")
	topics := fs.String("topics", "RELAY_TOPICS", "", "comma-separated topics for --create-topics (default: every topic of the schema catalog)")
	partitions := fs.Int("topic-partitions", "RELAY_TOPIC_PARTITIONS", 6, "partitions of topics created by --create-topics")
	replication := fs.Int("topic-replication", "RELAY_TOPIC_REPLICATION", 1, "replication factor of topics created by --create-topics")
	mode := fs.String("mode", "RELAY_MODE", "poll", "poll: read the outbox table in batches (SKIP LOCKED, shards); wal: stream the table's inserts through logical replication (pgoutput), one active instance per --slot")
	slot := fs.String("slot", "RELAY_SLOT", publisher.DefaultSlot, "--mode wal: logical replication slot to stream from (created if missing; one instance streams at a time, the others wait for it)")
	publication := fs.String("publication", "RELAY_PUBLICATION", publisher.DefaultPublication, "--mode wal: publication of the outbox table's inserts (created if missing)")
	statusEvery := fs.Duration("status-interval", "RELAY_STATUS_INTERVAL", publisher.DefaultStatusInterval, "--mode wal: how often acknowledged rows are deleted and the slot's LSN confirmed")
	startRetry := fs.Duration("slot-retry", "RELAY_SLOT_RETRY", publisher.DefaultStartRetry, "--mode wal: how often a standby instance tries to take the slot while another holds it")
	grace := fs.Duration("shutdown-grace", "RELAY_SHUTDOWN_GRACE", 10*time.Second, "how long the HTTP server may take to close on SIGTERM")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return kit.Usagef("unexpected argument %q", fs.Arg(0))
	}
	if err := kit.Require("database-url", *dbURL, "kafka-brokers", *kf.Brokers); err != nil {
		return kit.UsageError{Err: err}
	}
	if *shards < 1 || *workers < 1 || *batch < 1 || *cleanupBatch < 1 || *partitions < 1 || *replication < 1 {
		return kit.Usagef("--shards, --workers, --batch-size, --cleanup-batch, --topic-partitions and --topic-replication must be at least 1")
	}
	if *readTimeout <= 0 {
		return kit.Usagef("--read-timeout %s: must be positive", *readTimeout)
	}
	if *mode != "poll" && *mode != "wal" {
		return kit.Usagef("--mode %q: want poll or wal", *mode)
	}
	if !fs.Given("linger") {
		*linger = publisher.DefaultLinger(*mode)
	}
	log, stopTracing, err := lf.Start(ctx, os.Stderr, "relay")
	if err != nil {
		return err
	}
	defer stopTracing()
	pool, err := kit.NewPool(ctx, withPoolSize(*dbURL, publisher.PipelineConns(*workers)+1))
	if err != nil {
		return err
	}
	defer pool.Close()
	if *migrate {
		if err := outbox.Migrate(ctx, pool); err != nil {
			return err
		}
	}
	// The ready check closes over r, set below before the server starts.
	var r interface {
		Run(context.Context) error
		Ready(context.Context) error
	}
	ops, err := kit.NewOpsServer(*httpAddr, func(ctx context.Context) error { return r.Ready(ctx) })
	if err != nil {
		return err
	}
	if err := kit.RegisterPool(ops.Registry, "relay", pool); err != nil {
		return err
	}
	kcfg := kf.Config()
	cfg := publisher.Config{
		Pool: pool, Kafka: kcfg, Logger: log, Registerer: ops.Registry,
		Shards: *shards, Workers: *workers, BatchSize: *batch, ReadTimeout: *readTimeout, PollInterval: *poll, RebalanceInterval: *rebalance,
		MaxAttempts: *maxAttempts, BackoffMin: *backoffMin, BackoffMax: *backoffMax, DeliveryTimeout: *delivery,
		Linger: *linger, Compression: *compression, MaxMessageBytes: *maxBytes,
		Retention: *retention, CleanupInterval: *cleanupEvery, CleanupBatch: *cleanupBatch, MetricsInterval: *metricsEvery,
	}
	if *mode == "wal" {
		r, err = publisher.NewWAL(publisher.WALConfig{Config: cfg, Slot: *slot, Publication: *publication,
			StatusInterval: *statusEvery, StartRetry: *startRetry})
	} else {
		r, err = publisher.New(cfg)
	}
	if err != nil {
		return kit.UsageError{Err: err}
	}
	if *createTopics {
		list := kit.SplitBrokers(*topics)
		if len(list) == 0 {
			list = catalogTopics()
		}
		cl, err := kit.NewKafkaClient(ctx, kcfg, log)
		if err != nil {
			return err
		}
		err = publisher.CreateTopics(ctx, kadm.NewClient(cl), int32(*partitions), int16(*replication), list...)
		cl.Close()
		if err != nil {
			return err
		}
		log.Info("topics ready", "topics", list)
	}
	opsCtx, stopOps := context.WithCancel(context.WithoutCancel(ctx))
	opsDone := make(chan error, 1)
	go func() { opsDone <- ops.Run(opsCtx, log, *grace) }()
	runErr := r.Run(ctx)
	stopOps()
	if err := <-opsDone; err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}

// withPoolSize sets pool_max_conns on a database URL or keyword/value DSN
// that does not set it: the workers overlap their batches only with
// publisher.PipelineConns connections, and the ops server's ready check
// wants one more. A pool_max_conns given by the operator is kept.
func withPoolSize(dsn string, conns int) string {
	if strings.Contains(dsn, "pool_max_conns") {
		return dsn
	}
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("pool_max_conns", strconv.Itoa(conns))
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " pool_max_conns=" + strconv.Itoa(conns)
}

func catalogTopics() []string {
	cat := schemas.MustDefault()
	seen := map[string]bool{}
	var out []string
	for _, t := range cat.Types() {
		e, _ := cat.Lookup(t)
		if !seen[e.Topic] {
			seen[e.Topic] = true
			out = append(out, e.Topic)
		}
	}
	return out
}

// runOutbox is `relay outbox parked|retry ID|skip ID --reason R`.
func runOutbox(ctx context.Context, args []string, out io.Writer) error {
	fs := kit.NewFlagSet("relay outbox", "relay outbox — look at and release parked outbox rows.")
	fs.SetOutput(out)
	cmd := func(name string) func(context.Context, []string) error {
		return func(ctx context.Context, args []string) error { return outboxCommand(ctx, name, args, out) }
	}
	return fs.Dispatch(ctx, args, []kit.Command{
		{Name: "parked", Summary: "list parked rows and how many rows wait behind each", Run: cmd("parked")},
		{Name: "retry", Summary: "retry ID: retry a parked row (attempts start from zero)", Run: cmd("retry")},
		{Name: "skip", Summary: "skip ID --reason R: never publish a parked row; the rows behind it go", Run: cmd("skip")},
	})
}

// outboxCommand runs one outbox subcommand; the row id may come before or
// after the flags.
func outboxCommand(ctx context.Context, cmd string, args []string, out io.Writer) error {
	fs := kit.NewFlagSet("relay outbox "+cmd, "relay outbox "+cmd+" — look at and release parked outbox rows.")
	fs.SetOutput(out)
	dbURL := fs.String("database-url", "DATABASE_URL", "", "PostgreSQL URL of the service database holding the outbox (required)")
	var reason *string
	switch cmd {
	case "parked":
		fs.SetUsage("relay outbox parked [flags]")
	case "retry":
		fs.SetUsage("relay outbox retry ID [flags]")
	case "skip":
		fs.SetUsage("relay outbox skip ID --reason R [flags]")
		reason = fs.String("reason", "", "", "why the row is skipped (required; stored with the row)")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	pos := fs.Args()
	if err := kit.Require("database-url", *dbURL); err != nil {
		return kit.UsageError{Err: err}
	}
	var id int64
	switch cmd {
	case "parked":
		if len(pos) != 0 {
			return kit.Usagef("parked takes no argument")
		}
	case "retry", "skip":
		if len(pos) != 1 {
			return kit.Usagef("%s needs exactly one outbox row id", cmd)
		}
		var err error
		if id, err = strconv.ParseInt(pos[0], 10, 64); err != nil || id < 1 {
			return kit.Usagef("outbox row id %q: want a positive integer", pos[0])
		}
		if cmd == "skip" && strings.TrimSpace(*reason) == "" {
			return kit.Usagef("skip needs --reason")
		}
	}
	pool, err := pgxpool.New(ctx, *dbURL)
	if err != nil {
		return kit.Usagef("--database-url: %v", err)
	}
	defer pool.Close()
	switch cmd {
	case "parked":
		rows, err := outbox.Parked(ctx, pool)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tEVENT_ID\tTYPE\tTOPIC\tKEY\tATTEMPTS\tWAITING\tPARKED_AT\tLAST_ERROR")
		for _, p := range rows {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", p.ID, p.EventID, p.EventType, p.Topic, p.PartitionKey,
				p.Attempts, p.Waiting, p.ParkedAt.UTC().Format(time.RFC3339), p.LastError)
		}
		return tw.Flush()
	case "retry":
		if err := outbox.Retry(ctx, pool, id); err != nil {
			return err
		}
		fmt.Fprintf(out, "outbox row %d released for retry\n", id)
	case "skip":
		if err := outbox.Skip(ctx, pool, id, *reason); err != nil {
			return err
		}
		fmt.Fprintf(out, "outbox row %d skipped; the rows behind it will be published\n", id)
	}
	return nil
}
