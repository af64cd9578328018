// Package svc is the start-up and shutdown every saga service shares: flags
// with environment fallbacks, logging, the database pool and migrations,
// the ops listener (/metrics, /healthz, /readyz, /debug/pprof/ and the
// service's operator endpoints), the public API's listener apart from it,
// the in-process outbox relay, the idempotent consumer and the service's
// own workers. A service's main.go names what differs and calls Run.
package svc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/relay/publisher"
	"github.com/concordhq/concord/schemas/contract"
)

// Spec is what makes one service different from another.
type Spec struct {
	Name        string // binary name, also the default consumer group
	Summary     string // first line of --help
	DatabaseEnv string // environment variable of the database URL
	// DefaultAddr is the default --http-addr, the listener of the public
	// API (Env.API). Empty: the service has no public API, no --http-addr
	// and Env.API is nil.
	DefaultAddr string
	// DefaultOpsAddr is the default --ops-addr, the listener of /metrics,
	// /healthz, /readyz, /debug/pprof/ and the operator endpoints
	// (Env.Ops.Mux).
	DefaultOpsAddr string
	// Commands are operator commands run instead of the service
	// ("order-svc keys create …"), listed in --help.
	Commands []kit.Command
	// Topics are the topics the service consumes; none runs no consumer.
	Topics []string
	// ProducedTopics are created with the consumed ones (--create-topics)
	// when the service is the first to write them (the orchestrator's
	// command topics, before their participants run).
	ProducedTopics []string
	// Types are the event types the service acts on
	// (idempotent.Config.Types): the consumed topics carry others, which
	// are acknowledged without a dedupe row.
	Types []contract.Type
	// BatchHandler applies a consumer batch in one call (see
	// idempotent.BatchHandler); the events it emits are written with one
	// COPY per batch.
	BatchHandler idempotent.BatchHandler
	Migrate      func(ctx context.Context, pool *pgxpool.Pool) error
	// Flags registers the service's own flags before parsing.
	Flags func(fs *kit.FlagSet)
	// CheckFlags, when set, judges the service's own flag values after
	// parsing and before anything connects; its error is a usage error.
	CheckFlags func() error
	// Setup mounts the public API on env.API and the operator endpoints
	// on env.Ops.Mux, and returns the service's workers, each run until
	// ctx is done.
	Setup func(ctx context.Context, env *Env) ([]func(context.Context) error, error)
	// MaxConcurrentPartitions overrides the consumer's default.
	MaxConcurrentPartitions int
	// JoinPartitions: batches waiting for a slot join the next one's
	// transaction (idempotent.Config.JoinPartitions).
	JoinPartitions bool
	// DBMaxConns is the default of --db-max-conns (16 when zero).
	DBMaxConns int
}

// Env is what Setup gets to build the service's parts.
type Env struct {
	Pool *pgxpool.Pool
	// Ops is the operators' listener: Setup mounts admin endpoints on
	// Ops.Mux, which the public API's listener does not serve.
	Ops *kit.OpsServer
	// API is where Setup mounts the service's public endpoints; nil when
	// the Spec has no DefaultAddr.
	API   *http.ServeMux
	Log   *slog.Logger
	Kafka kit.KafkaConfig
	// Outbox appends events under the service's topic prefix, like the
	// consumer's handlers; hand it to whatever appends outside them.
	Outbox outbox.Writer
	// AfterConsumerCommit, when Setup sets it, is called each time the
	// consumer committed a batch of a topic (named without the topic
	// prefix): the service wakes the workers that act on what its handlers
	// stored, instead of leaving it to their poll.
	AfterConsumerCommit func(topic string)
}

// Run parses args, starts everything and blocks until ctx is done
// (SIGTERM), then drains: the HTTP server stops taking requests, the
// consumer finishes its batches and commits, the relay publishes what it
// holds, and the workers record what they have in flight.
func Run(ctx context.Context, args []string, spec Spec) error {
	for _, c := range spec.Commands {
		if len(args) > 0 && args[0] == c.Name {
			return c.Run(ctx, args[1:])
		}
	}
	fs := kit.NewFlagSet(spec.Name, spec.Summary)
	if len(spec.Commands) > 0 {
		fs.SetUsage(spec.Name + " [flags] | " + spec.Name + " COMMAND [arguments] [flags]")
		for _, c := range spec.Commands {
			fs.AddCommand(c.Name, c.Summary)
		}
	}
	lf := kit.AddLogFlags(fs)
	kf := kit.AddKafkaFlags(fs)
	dbURL := fs.String("database-url", spec.DatabaseEnv, "", "PostgreSQL URL of the service's own database")
	var addr *string
	if spec.DefaultAddr != "" {
		addr = fs.String("http-addr", "HTTP_ADDR", spec.DefaultAddr, "listen address of the public API (nothing of --ops-addr is served here)")
	}
	opsAddr := fs.String("ops-addr", "", spec.DefaultOpsAddr,
		"listen address of /metrics, /healthz, /readyz, /debug/pprof/ (--pprof) and the operator endpoints: keep it where only operators and the metrics scraper reach it")
	group := fs.String("group", "CONSUMER_GROUP", spec.Name, "Kafka consumer group")
	prefix := fs.String("topic-prefix", "CONCORD_TOPIC_PREFIX", "", "prefix of every topic consumed and produced (keeps side-by-side runs apart)")
	createTopics := fs.Bool("create-topics", "CREATE_TOPICS", true, "create the consumed topics (and those the service writes first) when missing (broker defaults)")
	partitions := fs.Int("topic-partitions", "TOPIC_PARTITIONS", 6, "partitions of topics this service creates")
	relayOn := fs.Bool("relay", "RUN_RELAY", true, "publish this service's outbox in-process (off when a separate relay binary runs)")
	grace := fs.Duration("shutdown-grace", "SHUTDOWN_GRACE", 20*time.Second, "how long draining may take after SIGTERM")
	session := fs.Duration("group-session-timeout", "GROUP_SESSION_TIMEOUT", 45*time.Second,
		"how long the group waits for a silent member before giving its partitions to the others; a member killed without leaving holds them this long (broker minimum: group.min.session.timeout.ms, 6s by default)")
	instance := fs.String("group-instance-id", "GROUP_INSTANCE_ID", "",
		"static group membership: an id unique among the running instances and kept across restarts (a host name, a pod ordinal); a restarted instance takes its partitions back at once instead of after --group-session-timeout. Empty: a dynamic member")
	slots := fs.Int("consumer-slots", "", cmp.Or(spec.MaxConcurrentPartitions, idempotent.DefaultMaxConcurrentPartitions),
		"partitions the consumer applies a batch of at once, each in its own transaction on a connection of its own (at most --db-max-conns)")
	join := fs.Bool("join-partitions", "", spec.JoinPartitions,
		"apply the batches of the partitions waiting for a --consumer-slots slot together, in the next one's transaction: fewer, larger transactions when partitions outnumber slots")
	maxConns := fs.Int("db-max-conns", "DB_MAX_CONNS", cmp.Or(spec.DBMaxConns, 16),
		"database connections the service may hold: API requests, the consumer's partitions, the relay and the workers share them")
	// Kafka's own consumer defaults. A floor (say 16 KiB / 20 ms) makes
	// every hop wait when the rate is too low to fill it, costs more CPU
	// per order in bench-saga at 100/s and 400/s, and has every idle
	// consumer fetch 50 times a second (README "Benchmarks").
	fetchWait := fs.Duration("fetch-max-wait", "FETCH_MAX_WAIT", 500*time.Millisecond,
		"how long the broker may hold a fetch that has less than --fetch-min-bytes; with nothing to read, how often an idle consumer asks again")
	fetchMin := fs.Int("fetch-min-bytes", "FETCH_MIN_BYTES", 1,
		"bytes a fetch waits for, up to --fetch-max-wait: 1 answers as soon as anything is there; more trades a wait on every hop for bigger consumer batches")
	profiling := fs.Bool("pprof", "PPROF", false, "serve /debug/pprof/ on --ops-addr (CPU and heap profiles; off by default: it exposes internals)")
	if spec.Flags != nil {
		spec.Flags(fs)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return kit.Usagef("unexpected argument %q", fs.Arg(0))
	}
	if err := kit.Require("database-url", *dbURL); err != nil {
		return kit.UsageError{Err: err}
	}
	if strings.ContainsFunc(*instance, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }) || len(*instance) > 249 {
		return kit.Usagef("--group-instance-id %q: want at most 249 printable characters without spaces", *instance)
	}
	if spec.CheckFlags != nil {
		if err := spec.CheckFlags(); err != nil {
			return kit.UsageError{Err: err}
		}
	}
	switch {
	case *fetchWait < 10*time.Millisecond: // the client's own floor
		return kit.Usagef("--fetch-max-wait %s: must be at least 10ms", *fetchWait)
	case *fetchMin < 1:
		return kit.Usagef("--fetch-min-bytes %d: must be at least 1", *fetchMin)
	case *slots < 1:
		return kit.Usagef("--consumer-slots %d: must be at least 1", *slots)
	}
	log, stopTracing, err := lf.Start(ctx, os.Stderr, spec.Name)
	if err != nil {
		return err
	}
	defer stopTracing()
	startCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	pool, err := newPool(startCtx, *dbURL, int32(*maxConns))
	if err != nil {
		return err
	}
	defer pool.Close()
	for _, m := range []func(context.Context, *pgxpool.Pool) error{outbox.Migrate, idempotent.Migrate, spec.Migrate} {
		if err := m(startCtx, pool); err != nil {
			return fmt.Errorf("migrations: %w", err)
		}
	}
	topics := make([]string, len(spec.Topics))
	for i, t := range spec.Topics {
		topics[i] = *prefix + t
	}
	kcfg := kf.Config()
	if *createTopics {
		all := slices.Clone(topics)
		// A topic both consumed and produced (funding-svc projects its own
		// account-events) is named once: Kafka refuses a CreateTopics
		// request naming a topic twice (INVALID_REQUEST).
		for _, t := range spec.ProducedTopics {
			if !slices.Contains(all, *prefix+t) {
				all = append(all, *prefix+t)
			}
		}
		if err := ensureTopics(startCtx, kcfg, log, all, int32(*partitions)); err != nil {
			return err
		}
	}
	ops, err := kit.NewOpsServer(*opsAddr, func(ctx context.Context) error { return pool.Ping(ctx) })
	if err != nil {
		return err
	}
	var api *kit.APIServer
	if addr != nil {
		if api, err = ops.NewAPIServer(*addr); err != nil {
			return err
		}
	}
	if err := kit.RegisterPool(ops.Registry, spec.Name, pool); err != nil {
		return err
	}
	if *profiling {
		ops.Mux.HandleFunc("/debug/pprof/", pprof.Index)
		ops.Mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	}
	events := outbox.Writer{TopicPrefix: *prefix}
	env := &Env{Pool: pool, Ops: ops, Log: log, Kafka: kcfg, Outbox: events}
	if api != nil {
		env.API = api.Mux
	}
	workers, err := spec.Setup(ctx, env)
	if err != nil {
		return err
	}
	rcfg := idempotent.Config{Group: *group, Topics: topics, Pool: pool, Kafka: kcfg, Logger: log, Registerer: ops.Registry,
		BatchHandler: spec.BatchHandler, Types: spec.Types, Outbox: events,
		MaxConcurrentPartitions: *slots, JoinPartitions: *join, DrainTimeout: *grace, InstanceID: *instance,
		KafkaOpts: []kgo.Opt{kgo.SessionTimeout(*session), kgo.FetchMaxWait(*fetchWait), kgo.FetchMinBytes(int32(*fetchMin))}}
	if wake := env.AfterConsumerCommit; wake != nil {
		rcfg.AfterDBCommit = func(topic string, _ int32, _ int64) { wake(strings.TrimPrefix(topic, *prefix)) }
	}
	// A service that consumes no topic (funding-svc reads a broker's
	// streams, not Kafka) runs no consumer.
	if len(topics) > 0 {
		runner, err := idempotent.NewRunner(rcfg)
		if err != nil {
			return err
		}
		workers = append(workers, runner.Run)
	}
	if *relayOn {
		// One worker: a service's outbox takes hundreds of rows a second,
		// which one pipelined worker publishes with room to spare (the
		// relay's benchmark drains tens of thousands). Every commit's
		// NOTIFY wakes every worker, and with two the second mostly
		// found its shards empty: a transaction and two round trips per
		// wake-up for nothing.
		rl, err := publisher.New(publisher.Config{Pool: pool, Kafka: kcfg, Logger: log, Registerer: ops.Registry, Workers: 1})
		if err != nil {
			return err
		}
		workers = append(workers, rl.Run)
	}

	started := []any{"ops", ops.Addr(), "group", *group, "topics", topics}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return ops.Run(gctx, log, *grace) })
	if api != nil {
		started = append(started, "http", api.Addr())
		g.Go(func() error { return api.Run(gctx, log, *grace) })
	}
	log.Info("started", started...)
	for _, w := range workers {
		g.Go(func() error {
			if err := w(gctx); err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		})
	}
	err = g.Wait()
	log.Info("stopped", "err", err)
	return err
}

// ensureTopics creates the topics that do not exist yet; "already exists"
// is success (another service created it first).
func ensureTopics(ctx context.Context, kcfg kit.KafkaConfig, log *slog.Logger, topics []string, partitions int32) error {
	cl, err := kit.NewKafkaClient(ctx, kcfg, log)
	if err != nil {
		return err
	}
	defer cl.Close()
	return publisher.CreateTopics(ctx, kadm.NewClient(cl), partitions, -1, topics...)
}

// newPool opens the service's pool with maxConns connections, unless the
// URL sets pool_max_conns itself. pgxpool's default (the number of CPUs,
// at least 4) is too small for a service whose API handlers, consumer
// partitions, relay and workers all share one pool: on a 2-core machine
// the consumer waited for connections the API held.
func newPool(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") && maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	kit.TracePool(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("database pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("database %s@%s:%d/%s does not answer: %w", cfg.ConnConfig.User, cfg.ConnConfig.Host,
			cfg.ConnConfig.Port, cfg.ConnConfig.Database, err)
	}
	return pool, nil
}
