// Command relay-bench measures the relay on the real stack and prints its
// figures beside the same-run ceilings:
//
//   - relay throughput: a backlog of --events rows (1 KiB payloads) drained
//     by one in-process relay, in events/s;
//
//   - commit-to-ack latency (p50, p99) at a fixed offered load of --rate
//     events/s appended through outbox.Append, one event per transaction;
//
//   - Kafka ceiling: raw franz-go produce of the same records with the
//     relay's producer options;
//
//   - database ceiling: a raw SELECT … FOR UPDATE SKIP LOCKED + mark loop
//     over the same rows at the relay's batch size.
//
//   - the same backlog again, each row carrying a traceparent, with tracing
//     on (exporting over OTLP to an in-process collector that discards it),
//     beside the untraced drain;
//
//   - the same backlog and offered load through relay --mode wal (logical
//     replication), printed beside the poll mode.
//
// It creates its own database, topic and replication slot and drops them at
// the end.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/infra/testkit/otlpsink"
	"github.com/concordhq/concord/infra/testkit/proc"
	"github.com/concordhq/concord/relay/internal/relaytest"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/relay/publisher"
	"github.com/concordhq/concord/schemas"
)

func main() { kit.Main("relay-bench", run) }

func run(ctx context.Context, args []string) error {
	fs := kit.NewFlagSet("relay-bench", "relay-bench — outbox relay throughput and latency against same-run ceilings")
	admin := fs.String("postgres-url", "CONCORD_POSTGRES_URL", "", "admin URL of the PostgreSQL server; a scratch database is created on it (required)")
	kf := kit.AddKafkaFlags(fs)
	events := fs.Int("events", "", 200_000, "events in the throughput runs")
	payload := fs.Int("payload", "", 1024, "approximate envelope size in bytes")
	keys := fs.Int("keys", "", 10_000, "distinct partition keys")
	partitions := fs.Int("partitions", "", 6, "partitions of the scratch topic")
	batch := fs.Int("batch-size", "", publisher.DefaultBatchSize, "relay batch size (and the database ceiling's)")
	workers := fs.Int("workers", "", publisher.DefaultWorkers, "relay workers")
	rate := fs.Int("rate", "", 2000, "offered load of the latency run, events/s")
	rateFor := fs.Duration("rate-duration", "", 15*time.Second, "length of the latency run")
	walRates := fs.String("wal-rates", "", "500,1000", "lower offered loads (comma-separated events/s) at which the WAL relay's commit-to-ack is measured too, after --rate; empty for none")
	compression := fs.String("compression", "", "none", "producer compression")
	linger := fs.Duration("linger", "", 0, "relay producer linger, as relay --linger (default 0 in poll mode, "+publisher.DefaultWALLinger.String()+" in WAL mode)")
	cpuProfile := fs.String("cpuprofile", "", "", "write a CPU profile of the relay's backlog drain to this file")
	walProfile := fs.String("wal-cpuprofile", "", "", "write a CPU profile of the WAL relay's backlog drain to this file")
	peerList := fs.String("peers", "", "poll,wal,debezium", "comma-separated relays to measure: poll (with the Kafka and database ceilings and the traced drain), "+
		"wal (relay --mode wal), debezium (Debezium's PostgreSQL connector with its outbox event router on Kafka Connect)")
	debeziumClasspath := fs.String("debezium-classpath", "CONCORD_DEBEZIUM_CLASSPATH", "",
		"Java class path of Kafka Connect and Debezium for the debezium peer; empty runs peers/debezium/fetch (Maven), from the relay module's directory, for it")
	debeziumHeap := fs.String("debezium-heap", "", "2g", "maximum heap (-Xmx) of the debezium peer's Kafka Connect JVM; 2g is what Kafka's connect-standalone.sh gives it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return kit.Usagef("unexpected argument %q", fs.Arg(0))
	}
	if err := kit.Require("postgres-url", *admin); err != nil {
		return kit.UsageError{Err: err}
	}
	peers, err := parsePeers(*peerList)
	if err != nil {
		return kit.UsageError{Err: err}
	}
	sweep, err := parseRates(*walRates)
	if err != nil {
		return kit.Usagef("wal-rates: %v", err)
	}
	if !jvmSize.MatchString(*debeziumHeap) {
		return kit.Usagef("debezium-heap %q: a JVM size such as 512m or 2g", *debeziumHeap)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	dbURL, drop, err := scratchDatabase(ctx, *admin)
	if err != nil {
		return err
	}
	defer drop()
	pool, err := kit.NewPool(ctx, dbURL+"?pool_max_conns=16")
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := outbox.Migrate(ctx, pool); err != nil {
		return err
	}
	kcfg := kf.Config()
	// Each mode's own default linger, as relay --mode has it.
	lingers := map[string]time.Duration{"poll": *linger, "wal": *linger}
	if !fs.Given("linger") {
		for mode := range lingers {
			lingers[mode] = publisher.DefaultLinger(mode)
		}
	}
	cfg := publisher.Config{Pool: pool, Kafka: kcfg, Logger: log, BatchSize: *batch, Workers: *workers, Compression: *compression, Linger: lingers["poll"]}
	cl, err := kit.NewKafkaClient(ctx, kcfg, log, publisher.ProducerOpts(cfg, func(string) (int32, bool) { return 0, false })...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// The topic is a prefix plus the events' catalog topic, so rows appended
	// through outbox.Writer carry it as inserted (what the WAL relay reads).
	writer := outbox.Writer{TopicPrefix: "relay-bench-" + uuid.NewString()[:8] + "."}
	_, probe, err := writer.Prepare(outbox.Event{Payload: relaytest.Data(uuid.NewString(), 0, 0)})
	if err != nil {
		return err
	}
	topic := probe.Topic
	if err := publisher.CreateTopics(ctx, adm, int32(*partitions), 1, topic); err != nil {
		return err
	}
	defer adm.DeleteTopics(context.WithoutCancel(ctx), topic) //nolint:errcheck

	walCfg := cfg
	walCfg.Linger = lingers["wal"]
	fmt.Printf("relay-bench: %d events, ~%d B payloads, %d keys, topic %s (%d partitions), batch %d, workers %d, linger %s (poll) and %s (wal), GOMAXPROCS %d\n",
		*events, *payload, *keys, topic, *partitions, *batch, *workers, cfg.Linger, walCfg.Linger, runtime.GOMAXPROCS(0))
	// The figures move with whatever else the machine runs: say how busy it was.
	fmt.Printf("  load average at start: %s\n", testkit.LoadAverage())
	defer func() { fmt.Printf("  load average at end:   %s\n", testkit.LoadAverage()) }()
	// Each phase prepares the backlog anew and lets it go before its
	// latency run: 200,000 prepared rows are 270 MB of live heap, whose
	// garbage collections (70-90 ms of marking every few seconds) the
	// in-process relay would otherwise share, as no relay process does.
	backlog := func() ([]outbox.Record, error) { return prepare(*events, *keys, *payload, topic) }

	var relayRate float64 // the poll mode's drain, for the ratios of the others
	if peers.poll {
		if relayRate, err = measurePoll(ctx, cl, cfg, pool, writer, backlog, *batch, *rate, *rateFor, *payload, *cpuProfile); err != nil {
			return err
		}
	}
	if peers.wal {
		if err := measureWAL(ctx, walCfg, pool, writer, backlog, relayRate, *rate, sweep, *rateFor, *payload, *walProfile); err != nil {
			return err
		}
	}
	if err := processMemory(ctx, kcfg, dbURL, pool, backlog, *batch, *workers, peers.modes(), lingers); err != nil {
		return err
	}
	if peers.debezium {
		rows, err := backlog()
		if err != nil {
			return err
		}
		dbz := debeziumPeer{classpath: *debeziumClasspath, heap: *debeziumHeap, kcfg: kcfg, dbURL: dbURL, pool: pool, adm: adm}
		res, err := dbz.run(ctx, rows, *rate, *rateFor, *payload, *partitions)
		printDebezium(res, err, relayRate, *rate)
	}
	return nil
}

// measurePoll prints the same-run ceilings and the poll mode's figures:
// backlog drain (untraced and traced) and commit-to-ack at the offered
// rate. It returns the untraced drain rate.
func measurePoll(ctx context.Context, cl *kgo.Client, cfg publisher.Config, pool *pgxpool.Pool, writer outbox.Writer,
	backlog func() ([]outbox.Record, error), batch, rate int, rateFor time.Duration, payload int, cpuProfile string) (float64, error) {
	rows, err := backlog()
	if err != nil {
		return 0, err
	}
	n := len(rows)
	// Kafka ceiling: the same records, straight through franz-go.
	kafkaRate, err := rawProduce(ctx, cl, rows)
	if err != nil {
		return 0, err
	}
	fmt.Printf("  ceiling kafka    raw franz-go produce (acks=all, idempotent): %9.0f events/s\n", kafkaRate)

	// Database ceiling: SELECT … FOR UPDATE SKIP LOCKED + mark, no Kafka.
	if err := load(ctx, pool, rows); err != nil {
		return 0, err
	}
	dbRate, err := rawLoop(ctx, pool, batch, n)
	if err != nil {
		return 0, err
	}
	fmt.Printf("  ceiling database SELECT … FOR UPDATE SKIP LOCKED + mark, batch %d: %9.0f rows/s\n", batch, dbRate)

	// Relay throughput over a backlog.
	if err := load(ctx, pool, rows); err != nil {
		return 0, err
	}
	stopProfile, err := startProfile(cpuProfile)
	if err != nil {
		return 0, err
	}
	relayRate, err := drain(ctx, cfg, pool, n)
	stopProfile()
	if err != nil {
		return 0, err
	}
	lower := min(kafkaRate, dbRate)
	fmt.Printf("  relay            backlog drained:                             %9.0f events/s (%.0f%% of the lower ceiling; target >= 25000 and >= 50%%)\n",
		relayRate, 100*relayRate/lower)

	// The same backlog, each row with the traceparent of the span that
	// appended it, drained with tracing on: a publish span per record,
	// exported over OTLP to an in-process collector that discards it.
	// Tracing stays on for the rest of the run; those rows carry no trace,
	// so the relay makes no spans for them.
	if err := load(ctx, pool, traced(rows)); err != nil {
		return 0, err
	}
	sink, err := otlpsink.Start(ctx)
	if err != nil {
		return 0, err
	}
	defer sink.Close(context.WithoutCancel(ctx)) //nolint:errcheck
	tracedRate, err := drain(ctx, cfg, pool, n)
	if err != nil {
		return 0, err
	}
	if err := sink.Flush(ctx); err != nil {
		return 0, fmt.Errorf("flush spans: %w", err)
	}
	fmt.Printf("  relay            backlog drained, traced:                     %9.0f events/s (%.2f x untraced; %s)\n",
		tracedRate, tracedRate/relayRate, sink.Stats())

	// Latency at a fixed offered load.
	if _, err := pool.Exec(ctx, "truncate outbox"); err != nil {
		return 0, err
	}
	lr, err := latency(ctx, pollRunner(cfg), pool, writer, rate, rateFor, payload)
	if err != nil {
		return 0, err
	}
	fmt.Printf("  relay            commit-to-ack at %d events/s offered (%s (target p99 <= 100ms)\n%s", rate, lr, lr.legsLine())
	return relayRate, nil
}

// measureWAL prints relay --mode wal's backlog drain (beside the poll
// mode's, when that ran) and its commit-to-ack at the offered rate, then at
// each of the sweep's rates.
func measureWAL(ctx context.Context, cfg publisher.Config, pool *pgxpool.Pool, writer outbox.Writer,
	backlog func() ([]outbox.Record, error), relayRate float64, rate int, sweep []int, rateFor time.Duration, payload int, cpuProfile string) error {
	// A WAL relay listens for nothing: appending without the NOTIFY keeps
	// the appenders' commits off PostgreSQL's notification lock, as a
	// deployment with relay --mode wal would (outbox.Writer.NoWake).
	writer.NoWake = true
	// The offered load with no relay running (and no slot yet): how busy
	// the appending transactions alone keep the machine, to read beside
	// each latency run's figure.
	if _, err := pool.Exec(ctx, "truncate outbox"); err != nil {
		return err
	}
	busy := busySince()
	o, err := offer(ctx, pool, writer, rate, rateFor, payload)
	if err != nil {
		return err
	}
	fmt.Printf("  appenders alone  at %d events/s offered, no relay running (%s): the machine %.0f%% busy\n", rate, o, 100*busy())
	rows, err := backlog()
	if err != nil {
		return err
	}
	// WAL mode: the same backlog, appended while the slot exists and the
	// relay is stopped, then drained; and the same offered load.
	wcfg := publisher.WALConfig{Config: cfg, Slot: "relay_bench_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")}
	wcfg.Publication = wcfg.Slot
	walRate, err := walDrain(ctx, wcfg, pool, rows, cpuProfile)
	defer dropSlot(pool, wcfg.Slot)
	if err != nil {
		return err
	}
	fmt.Printf("  relay --mode wal backlog drained:                             %9.0f events/s (%s; target >= 60000 and >= 1.4 x)\n",
		walRate, ofPoll(walRate, relayRate))
	// The lower rates show where the p99 holds on this machine: at the
	// offered rate its cores may be saturated by the appending
	// transactions, the broker and the relay together.
	for _, r := range append([]int{rate}, sweep...) {
		if _, err := pool.Exec(ctx, "truncate outbox"); err != nil {
			return err
		}
		lr, err := latency(ctx, walRunner(wcfg), pool, writer, r, rateFor, payload)
		if err != nil {
			return err
		}
		fmt.Printf("  relay --mode wal commit-to-ack at %d events/s offered (%s (target p99 <= 10ms at 2000/s)\n%s", r, lr, lr.legsLine())
	}
	return nil
}

// parseRates reads a comma-separated list of positive event rates.
func parseRates(list string) ([]int, error) {
	var rates []int
	for f := range strings.SplitSeq(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		r, err := strconv.Atoi(f)
		if err != nil || r <= 0 {
			return nil, fmt.Errorf("%q is not a positive number of events/s", f)
		}
		rates = append(rates, r)
	}
	return rates, nil
}

// ofPoll is rate as a multiple of the poll mode's, when that ran.
func ofPoll(rate, poll float64) string {
	if poll == 0 {
		return "poll mode not run"
	}
	return fmt.Sprintf("%.2f x poll mode", rate/poll)
}

// jvmSize is a size as java's -Xmx takes it.
var jvmSize = regexp.MustCompile(`^[0-9]+[kKmMgG]?$`)

// peerSet is the relays one run measures.
type peerSet struct{ poll, wal, debezium bool }

func parsePeers(list string) (peerSet, error) {
	var ps peerSet
	for _, name := range strings.Split(list, ",") {
		switch strings.TrimSpace(name) {
		case "poll":
			ps.poll = true
		case "wal":
			ps.wal = true
		case "debezium":
			ps.debezium = true
		case "":
		default:
			return peerSet{}, fmt.Errorf("peers: unknown peer %q (poll, wal, debezium)", name)
		}
	}
	if ps == (peerSet{}) {
		return peerSet{}, errors.New("peers: none given (poll, wal, debezium)")
	}
	return ps, nil
}

// modes are the relay binary's modes among the peers.
func (ps peerSet) modes() []string {
	var out []string
	if ps.poll {
		out = append(out, "poll")
	}
	if ps.wal {
		out = append(out, "wal")
	}
	return out
}

// runner is a relay of either mode, started and ready.
type runner func(ctx context.Context, onAck func(publisher.Ack)) (run func(context.Context) error, ready func() bool, err error)

func pollRunner(cfg publisher.Config) runner {
	return func(ctx context.Context, onAck func(publisher.Ack)) (func(context.Context) error, func() bool, error) {
		cfg.OnAck = onAck
		r, err := publisher.New(cfg)
		if err != nil {
			return nil, nil, err
		}
		shards := cfg.Shards
		if shards <= 0 {
			shards = publisher.DefaultShards
		}
		return r.Run, func() bool { return len(r.OwnedShards()) >= shards }, nil
	}
}

func walRunner(cfg publisher.WALConfig) runner {
	return func(ctx context.Context, onAck func(publisher.Ack)) (func(context.Context) error, func() bool, error) {
		cfg.OnAck = onAck
		w, err := publisher.NewWAL(cfg)
		if err != nil {
			return nil, nil, err
		}
		return w.Run, w.Streaming, nil
	}
}

func dropSlot(pool *pgxpool.Pool, slot string) {
	for range 100 {
		_, err := pool.Exec(context.Background(), "select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = $1", slot)
		if err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond) // the walsender of the stopped relay is exiting
	}
}

// walDrain creates the slot (a relay started until it streams), appends
// the backlog in transactions of 5,000 rows with no relay running, then
// starts a WAL relay and returns events/s until every row is acknowledged
// and marked published.
func walDrain(ctx context.Context, cfg publisher.WALConfig, pool *pgxpool.Pool, rows []outbox.Record, profile string) (float64, error) {
	if _, err := pool.Exec(ctx, "truncate outbox"); err != nil {
		return 0, err
	}
	if err := runUntil(ctx, walRunner(cfg), nil, func() (bool, error) { return true, nil }); err != nil {
		return 0, err
	}
	if err := appendBacklog(ctx, pool, rows); err != nil {
		return 0, err
	}
	var acked atomic.Int64
	var start time.Time
	stopProfile, err := startProfile(profile)
	if err != nil {
		return 0, err
	}
	defer stopProfile()
	err = runUntil(ctx, walRunner(cfg), func(publisher.Ack) { acked.Add(1) }, func() (bool, error) {
		if start.IsZero() {
			start = time.Now()
		}
		if acked.Load() < int64(len(rows)) {
			return false, nil
		}
		var pending bool
		err := pool.QueryRow(ctx, "select exists (select 1 from outbox where published_at is null and skipped_at is null)").Scan(&pending)
		return !pending, err
	})
	if err != nil {
		return 0, err
	}
	return float64(len(rows)) / time.Since(start).Seconds(), nil
}

// appendBacklog appends rows to a running relay's outbox, 5,000 rows a
// transaction.
func appendBacklog(ctx context.Context, pool *pgxpool.Pool, rows []outbox.Record) error {
	for i := 0; i < len(rows); i += 5000 {
		vals := make([][]any, 0, 5000)
		for _, r := range rows[i:min(i+5000, len(rows))] {
			vals = append(vals, r.Values())
		}
		if _, err := pool.CopyFrom(ctx, pgx.Identifier{"outbox"}, outbox.Columns, pgx.CopyFromRows(vals)); err != nil {
			return fmt.Errorf("load outbox: %w", err)
		}
	}
	return nil
}

// runUntil runs a relay, waits until it is ready, then polls done every
// 20ms (5 minutes at most) and stops the relay.
func runUntil(ctx context.Context, rn runner, onAck func(publisher.Ack), done func() (bool, error)) error {
	run, ready, err := rn(ctx, onAck)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = run(rctx) }()
	defer func() { cancel(); wg.Wait() }()
	deadline := time.Now().Add(5 * time.Minute)
	for !ready() {
		if time.Now().After(deadline) {
			return errors.New("relay not ready within 5 minutes")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return errors.New("relay did not finish within 5 minutes")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startProfile starts a CPU profile into path ("" profiles nothing) and
// returns what stops it.
func startProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func scratchDatabase(ctx context.Context, admin string) (string, func(), error) {
	name := "relay_bench_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "create database "+name); err != nil {
		return "", nil, err
	}
	u, err := url.Parse(admin)
	if err != nil {
		return "", nil, err
	}
	u.Path, u.RawQuery = "/"+name, ""
	drop := func() {
		c, err := pgx.Connect(context.Background(), admin)
		if err == nil {
			_, _ = c.Exec(context.Background(), "drop database if exists "+name+" with (force)")
			_ = c.Close(context.Background())
		}
	}
	return u.String(), drop, nil
}

func prepare(n, keys, size int, topic string) ([]outbox.Record, error) {
	ks := make([]string, keys)
	for i := range ks {
		ks[i] = uuid.NewString()
	}
	// The envelope without padding is about 420 bytes.
	pad := max(size-420, 0)
	out := make([]outbox.Record, n)
	for i := range out {
		key := ks[i%keys]
		_, rec, err := outbox.Prepare(outbox.Event{Payload: relaytest.Data(key, i/keys, pad)})
		if err != nil {
			return nil, err
		}
		rec.Topic = topic
		out[i] = rec
	}
	return out, nil
}

// traced is rows with the traceparent of a span of its own each, as rows
// appended under a request's or a handler's span store it.
func traced(rows []outbox.Record) []outbox.Record {
	out := make([]outbox.Record, len(rows))
	for i, r := range rows {
		id := uuid.New()
		r.Headers = map[string]string{schemas.HeaderTraceparent: fmt.Sprintf("00-%x-%x-01", id[:], id[:8])}
		out[i] = r
	}
	return out
}

func kafkaRecord(r outbox.Record) *kgo.Record {
	return &kgo.Record{Topic: r.Topic, Key: []byte(r.PartitionKey), Value: r.Payload, Headers: []kgo.RecordHeader{
		{Key: schemas.HeaderEventID, Value: []byte(r.EventID)},
		{Key: schemas.HeaderEventType, Value: []byte(r.EventType)},
		{Key: schemas.HeaderEventVersion, Value: []byte(fmt.Sprint(r.EventVersion))},
		{Key: schemas.HeaderContentType, Value: []byte(schemas.ContentTypeJSON)},
	}}
}

func rawProduce(ctx context.Context, cl *kgo.Client, rows []outbox.Record) (float64, error) {
	var failed atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	for _, r := range rows {
		cl.Produce(ctx, kafkaRecord(r), func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return 0, err
	}
	if failed.Load() > 0 {
		return 0, fmt.Errorf("raw produce: %d records failed: %v", failed.Load(), firstErr.Load())
	}
	return float64(len(rows)) / time.Since(start).Seconds(), nil
}

func load(ctx context.Context, pool *pgxpool.Pool, rows []outbox.Record) error {
	if _, err := pool.Exec(ctx, "truncate outbox"); err != nil {
		return err
	}
	vals := make([][]any, len(rows))
	for i, r := range rows {
		vals[i] = r.Values()
	}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"outbox"}, outbox.Columns, pgx.CopyFromRows(vals)); err != nil {
		return fmt.Errorf("load outbox: %w", err)
	}
	_, err := pool.Exec(ctx, "vacuum analyze outbox")
	return err
}

func rawLoop(ctx context.Context, pool *pgxpool.Pool, batch, total int) (float64, error) {
	start := time.Now()
	done := 0
	for done < total {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `select id, partition_key, topic, payload::text from outbox
				where published_at is null and skipped_at is null order by id limit $1 for update skip locked`, batch)
			if err != nil {
				return err
			}
			var ids []int64
			var id int64
			var key, topic, payload string
			if _, err := pgx.ForEachRow(rows, []any{&id, &key, &topic, &payload}, func() error {
				ids = append(ids, id)
				return nil
			}); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, "update outbox set published_at = now() where id = any($1)", ids)
			done += len(ids)
			return err
		})
		if err != nil {
			return 0, err
		}
	}
	return float64(total) / time.Since(start).Seconds(), nil
}

// drain runs a relay over the loaded backlog and returns events/s from its
// start until the last row is marked published. Progress is counted with the
// OnAck hook, not by counting pending rows: a count(*) over a 200k-row
// backlog is a parallel sequential scan, and polling it every few
// milliseconds would take the CPU the relay is being measured on. The
// database is asked only once every row has its ack, for the marks.
func drain(ctx context.Context, cfg publisher.Config, pool *pgxpool.Pool, total int) (float64, error) {
	var acked atomic.Int64
	cfg.OnAck = func(publisher.Ack) { acked.Add(1) }
	r, err := publisher.New(cfg)
	if err != nil {
		return 0, err
	}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	start := time.Now()
	go func() { defer wg.Done(); _ = r.Run(rctx) }()
	defer func() { cancel(); wg.Wait() }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if acked.Load() >= int64(total) {
			var pending bool
			if err := pool.QueryRow(ctx, `select exists (select 1 from outbox
				where published_at is null and skipped_at is null)`).Scan(&pending); err != nil {
				return 0, err
			}
			if !pending {
				return float64(total) / time.Since(start).Seconds(), nil
			}
		}
		if time.Since(start) > 5*time.Minute {
			return 0, fmt.Errorf("relay acknowledged %d of %d rows in 5 minutes", acked.Load(), total)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-tick.C:
		}
	}
}

func latency(ctx context.Context, rn runner, pool *pgxpool.Pool, writer outbox.Writer, rate int, d time.Duration, size int) (latencyRun, error) {
	var mu sync.Mutex
	acks := map[string]publisher.Ack{} // the first ack of each event
	dups := 0
	run, ready, err := rn(ctx, func(a publisher.Ack) {
		mu.Lock()
		defer mu.Unlock()
		if _, dup := acks[a.EventID]; dup {
			dups++
			return
		}
		acks[a.EventID] = a
	})
	if err != nil {
		return latencyRun{}, err
	}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = run(rctx) }()
	defer func() { cancel(); wg.Wait() }()
	// Wait for the relay to own its shards (or stream) before offering load,
	// then for one event to come through: a WAL relay's walsender first
	// decodes again from the slot's restart point, which a steady load
	// never meets (seconds after a restart; the first run's figures had it).
	for !ready() {
		time.Sleep(10 * time.Millisecond)
	}
	var warm schemas.Envelope
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		warm, err = writer.Append(ctx, tx, outbox.Event{Payload: relaytest.Data(uuid.NewString(), 0, 0)})
		return err
	}); err != nil {
		return latencyRun{}, err
	}
	acked := func(id string) bool {
		mu.Lock()
		defer mu.Unlock()
		_, ok := acks[id]
		return ok
	}
	for deadline := time.Now().Add(time.Minute); !acked(warm.EventID); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return latencyRun{}, errors.New("the warm-up event was not acknowledged within a minute")
		}
	}

	busy := busySince()
	o, err := offer(ctx, pool, writer, rate, d, size)
	if err != nil {
		return latencyRun{}, err
	}
	// Only the offered events count: an event acknowledged again (at least
	// once allows it) is counted apart, never as a second latency.
	// The wait looks only at the count: the acks' callback takes mu too,
	// and a scan of every offered id under it would delay the acks it
	// measures. Acks of other events (the warm-up's) make the count an
	// upper bound, so the offered ids are checked once it is reached.
	got := make([]timedAck, 0, len(o.ids))
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		if len(acks) >= len(o.ids) {
			got = got[:0]
			for i, id := range o.ids {
				if a, ok := acks[id]; ok {
					got = append(got, timedAck{a, o.returned[i]})
				}
			}
		}
		mu.Unlock()
		if len(got) == len(o.ids) {
			break
		}
		if time.Now().After(deadline) {
			return latencyRun{}, fmt.Errorf("only %d of %d events acknowledged", len(got), len(o.ids))
		}
	}
	// How busy the machine was, every process on it: a p99 measured with
	// the cores saturated is queueing for CPU, whatever the relay does.
	mu.Lock()
	defer mu.Unlock()
	lr := latencyRun{offered: o, duplicates: dups, busy: busy()}
	lr.p50, lr.p99 = percentiles(got, func(a timedAck) time.Duration { return a.Acked.Sub(a.Inserted) })
	lr.legs = ackLegs(got)
	return lr, nil
}

// busySince starts measuring the share of the machine's cores busy, every
// process on it, from now until the returned function is called (0 where
// /proc/stat cannot be read).
func busySince() func() float64 {
	cpu0, err0 := proc.MachineCPU()
	t0 := time.Now()
	return func() float64 {
		cpu1, err := proc.MachineCPU()
		if err0 != nil || err != nil {
			return 0
		}
		return proc.BusyShare(cpu1-cpu0, time.Since(t0))
	}
}

// leg is one part of commit-to-ack, its p50 and p99 over the run's events.
type leg struct {
	name     string
	p50, p99 time.Duration
}

// timedAck is an event's ack and when its commit returned to the
// appender.
type timedAck struct {
	publisher.Ack
	returned time.Time
}

// ackLegs splits commit-to-ack, measured from the row's insert
// (created_at), where the relay knows the times: from the insert to its
// transaction's commit (WAL mode only: the stream gives the commit time),
// until the relay read the row, until Kafka's ack; in WAL mode the
// commit-to-ack from the commit itself, and from the commit to its
// return to the appender (the WAL flush and the answer). Last, from the
// commit's return to the ack: what an application that saw its commit
// succeed waits for the event to be in Kafka.
func ackLegs(acks []timedAck) []leg {
	var legs []leg
	add := func(name string, d func(timedAck) time.Duration) {
		p50, p99 := percentiles(acks, d)
		legs = append(legs, leg{name, p50, p99})
	}
	wal := !acks[0].Committed.IsZero()
	if wal {
		add("insert → commit", func(a timedAck) time.Duration { return a.Committed.Sub(a.Inserted) })
		add("commit → read", func(a timedAck) time.Duration { return a.Read.Sub(a.Committed) })
	} else {
		add("insert → read", func(a timedAck) time.Duration { return a.Read.Sub(a.Inserted) })
	}
	add("read → ack", func(a timedAck) time.Duration { return a.Acked.Sub(a.Read) })
	if wal {
		add("commit → ack", func(a timedAck) time.Duration { return a.Acked.Sub(a.Committed) })
		add("commit → its return", func(a timedAck) time.Duration { return a.returned.Sub(a.Committed) })
	}
	add("return → ack", func(a timedAck) time.Duration { return a.Acked.Sub(a.returned) })
	return legs
}

func percentiles(acks []timedAck, d func(timedAck) time.Duration) (p50, p99 time.Duration) {
	ds := make([]time.Duration, len(acks))
	for i, a := range acks {
		ds[i] = d(a)
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[len(ds)*99/100]
}

// latencyRun is a commit-to-ack run's percentiles, what it offered and how
// many acknowledgements repeated an event.
type latencyRun struct {
	p50, p99   time.Duration
	offered    offered
	duplicates int
	legs       []leg   // where the time went, when the relay told
	busy       float64 // the share of the machine's cores busy meanwhile
}

func (l latencyRun) String() string {
	return fmt.Sprintf("%d events, %s; %d acknowledged twice; the machine %.0f%% busy): p50 %s  p99 %s", len(l.offered.ids), l.offered,
		l.duplicates, 100*l.busy, l.p50.Round(100*time.Microsecond), l.p99.Round(100*time.Microsecond))
}

// legsLine is a line of each leg's percentiles ("" when the relay told none).
func (l latencyRun) legsLine() string {
	if len(l.legs) == 0 {
		return ""
	}
	parts := make([]string, len(l.legs))
	for i, g := range l.legs {
		parts[i] = fmt.Sprintf("%s %s / %s", g.name, g.p50.Round(100*time.Microsecond), g.p99.Round(100*time.Microsecond))
	}
	return "                   each leg's p50 / p99: " + strings.Join(parts, ", ") + "\n"
}

// offered is what offer appended: each event's id and when its commit
// returned, and the rate reached.
type offered struct {
	ids      []string
	returned []time.Time
	elapsed  time.Duration // from the first append's schedule to the last commit
}

func (o offered) String() string {
	return fmt.Sprintf("%.0f/s reached", float64(len(o.ids))/o.elapsed.Seconds())
}

// appenders is how many transactions offer keeps open at once. On a
// 2-core machine the commits, not the appenders, bound the rate reached
// (24 reached no more than 8, about 1,400-1,600 of 2,000/s, and raised the
// p50), so the figures print the rate reached beside the rate offered.
const appenders = 8

// offer appends events at rate for d, each in a transaction of its own,
// from the appenders, and returns their ids and the rate it reached.
func offer(ctx context.Context, pool *pgxpool.Pool, writer outbox.Writer, rate int, d time.Duration, size int) (offered, error) {
	total := int(float64(rate) * d.Seconds())
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = uuid.NewString()
	}
	pad := max(size-420, 0)
	ids, returned := make([]string, total), make([]time.Time, total)
	jobs := make(chan int, total)
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	for range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				key := keys[i%len(keys)]
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					env, err := writer.Append(ctx, tx, outbox.Event{Payload: relaytest.Data(key, i, pad)})
					ids[i] = env.EventID
					return err
				})
				returned[i] = time.Now()
				if err != nil {
					select {
					case errc <- err:
					default:
					}
				}
			}
		}()
	}
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	for i := range total {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errc:
		return offered{}, err
	default:
	}
	return offered{ids: ids, returned: returned, elapsed: time.Since(start)}, nil
}
