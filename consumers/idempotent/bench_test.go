package idempotent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/infra/testkit/otlpsink"
	"github.com/concordhq/concord/infra/testkit/proc"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
)

// benchRowsDDL is the benchmark handler's effect: one row per event.
const benchRowsDDL = `CREATE TABLE bench_rows (
    event_id uuid NOT NULL,
    aggregate_id text NOT NULL,
    seq bigint NOT NULL,
    occurred_at timestamptz NOT NULL)`

const insertBenchRow = `INSERT INTO bench_rows (event_id, aggregate_id, seq, occurred_at) VALUES ($1, $2, $3, $4)`

type benchRow struct {
	id  uuid.UUID
	agg string
	seq int64
	at  time.Time
}

// BenchmarkConsumerThroughput applies BENCH_EVENTS (default 200k) 1 KiB
// events from 12 partitions with a one-row handler, three times (a
// per-event Handler, then a BatchHandler that sends its INSERTs as one pgx
// batch, then the BatchHandler again with tracing on, each with its own
// group), and in the same run inserts the same rows with
// batched INSERTs (pgx batches, one transaction per batch, the same
// parallelism) without Kafka or dedupe, and with the dedupe rows (the
// ceiling, just before and just after the BatchHandler run). Run it with
// `make bench-consumer`.
func BenchmarkConsumerThroughput(b *testing.B) {
	n := 200000
	if v := os.Getenv("BENCH_EVENTS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	const partitions, parallel, batchSize = 12, 8, 1000
	k := testkit.NewKafka(b)
	dbURL := testkit.NewDatabase(b, testkit.PostgresURL(b))
	sep := "?"
	if strings.Contains(dbURL, "?") {
		sep = "&"
	}
	pool := testkit.Pool(b, dbURL+sep+"pool_max_conns="+strconv.Itoa(parallel+2))
	ctx := context.Background()
	if err := idempotent.Migrate(ctx, pool); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, benchRowsDDL); err != nil {
		b.Fatal(err)
	}
	emptyRows := func() { // each phase writes the same rows afresh
		if _, err := pool.Exec(ctx, `TRUNCATE bench_rows`); err != nil {
			b.Fatal(err)
		}
	}
	topic := k.CreateTopic(b, "bench", partitions)

	// Produce the events: 1 KiB envelopes of order.created v2.
	rows := make([]benchRow, n)
	pad := strings.Repeat("x", 620)
	// Uncompressed, as the relay publishes by default (--compression none).
	cl := k.Client(b, kgo.ProducerLinger(10*time.Millisecond), kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	t0 := time.Now()
	var wg sync.WaitGroup
	var perr error
	var mu sync.Mutex
	for i := 0; i < n; i++ {
		agg := fmt.Sprintf("order-%05d", i%5000)
		id := schemas.NewEventID()
		rows[i] = benchRow{uuid.MustParse(id), agg, int64(i), time.Now().UTC()}
		// The handler reads seq back from total_amount.
		data, _ := json.Marshal(map[string]any{"order_id": id, "customer_id": agg, "currency": "EUR", "total_amount": i,
			"items": []map[string]any{{"sku": "SKU-1", "quantity": 1, "unit_price": i}}, "note": pad})
		v, _ := schemas.Envelope{EventID: id, EventType: "order.created", EventVersion: 2, Timestamp: rows[i].at,
			AggregateType: "order", AggregateID: agg, CorrelationID: agg, Data: data}.Marshal()
		if i == 0 && (len(v) < 1000 || len(v) > 1100) {
			b.Fatalf("event is %d bytes, want about 1 KiB", len(v))
		}
		// Each record carries a traceparent, as a traced relay sets it.
		rec := record(topic, agg, id, v)
		tid := uuid.New()
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: schemas.HeaderTraceparent, Value: fmt.Appendf(nil, "00-%x-%x-01", tid[:], tid[:8])})
		wg.Add(1)
		cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				perr = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if perr != nil {
		b.Fatal(perr)
	}
	b.Logf("produced %d events in %s", n, time.Since(t0).Round(time.Millisecond))

	// The figures move with whatever else the machine runs.
	loadStart := testkit.LoadAverage()
	b.ResetTimer()
	// The handler's work per event: decode the event's typed payload
	// through the contract, as the services' handlers do, and insert one
	// row with its total_amount as seq. The baseline inserts the same rows
	// but has seq in memory (it has no event to decode). The BatchHandler
	// queues the same INSERTs on one pgx.Batch, as the baseline does; the
	// per-event Handler sends one at a time.
	seqOf := func(ev idempotent.Event) (int64, error) {
		p, err := contract.Decode[contract.OrderCreatedV2](ev.Envelope)
		if err != nil {
			return 0, idempotent.Permanent(err)
		}
		return p.TotalAmount, nil
	}
	batchHandler := func(ctx context.Context, tx pgx.Tx, evs []idempotent.Event, _ outbox.Emitter) error {
		var bt pgx.Batch
		for _, ev := range evs {
			seq, err := seqOf(ev)
			if err != nil {
				return err
			}
			bt.Queue(insertBenchRow, ev.EventID, ev.AggregateID, seq, ev.Timestamp)
		}
		return tx.SendBatch(ctx, &bt).Close()
	}
	perEvent := func(ctx context.Context, tx pgx.Tx, ev idempotent.Event, _ outbox.Emitter) error {
		seq, err := seqOf(ev)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, insertBenchRow, ev.EventID, ev.AggregateID, seq, ev.Timestamp)
		return err
	}
	var batchStats idempotent.Stats
	consume := func(cfg idempotent.Config) float64 {
		emptyRows()
		cfg.Group, cfg.Topics, cfg.Pool, cfg.Kafka = testkit.UniqueName(b, "bench"), []string{topic}, pool, kafkaConfig(k)
		cfg.MaxConcurrentPartitions, cfg.MaxBatchRecords = parallel, batchSize
		// Fetches of whole batches; the response as a whole is capped
		// by the runner (MaxBufferedBytes/4).
		cfg.KafkaOpts = []kgo.Opt{kgo.FetchMaxPartitionBytes(4 << 20)}
		r := start(b, cfg)
		var first time.Time
		var firstN int64
		deadline := time.Now().Add(20 * time.Minute)
		for {
			s := r.Stats()
			if firstN == 0 && s.Applied > 0 {
				first, firstN = time.Now(), s.Applied
			}
			if s.Applied >= int64(n) {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("consumer did not finish: %+v", s)
			}
			time.Sleep(20 * time.Millisecond) // polling the counters, not synchronising
		}
		consumed := time.Since(first)
		batchStats = r.Stats()
		r.stop(b)
		if got := count(b, pool, `SELECT count(*) FROM bench_rows`); got != n {
			b.Fatalf("bench_rows = %d, want %d", got, n)
		}
		return float64(int64(n)-firstN) / consumed.Seconds()
	}
	// Each phase's goroutines (the runner's, franz-go's, pgx's) carry its
	// name as a profiler label: go test -cpuprofile, then
	// go tool pprof -tagfocus phase=batch.
	phase := func(name string, run func() float64) (rate float64) {
		pprof.Do(ctx, pprof.Labels("phase", name), func(context.Context) { rate = run() })
		return rate
	}
	// The database work the consumer cannot avoid: the same INSERTs plus the
	// dedupe rows (one unnest INSERT per batch, as the runner writes them),
	// no Kafka, no decoding. The consumer's rate is bounded by this, not by
	// the raw rate: each dedupe row updates two indexes, bench_rows none.
	// It is measured just before and just after the BatchHandler run, whose
	// ratio is to their mean: the machine's other work comes and goes.
	floor := func(group string) float64 {
		emptyRows()
		return phase("raw+dedupe", func() float64 {
			floorStart := time.Now()
			if err := insertRawWithDedupe(ctx, pool, group, rows, parallel, batchSize); err != nil {
				b.Fatal(err)
			}
			return float64(n) / time.Since(floorStart).Seconds()
		})
	}
	// Where the CPU goes, by process: this one (runner, franz-go, pgx, the
	// handler), PostgreSQL and the broker, and what the whole machine did
	// meanwhile (the other work sharing it included).
	cpu := newCPUMeter(b, pool, k.Brokers[0])
	perEventRate := phase("per-event", func() float64 { return consume(idempotent.Config{Handler: perEvent}) })
	floorCPU := cpu.start()
	floorBefore := floor("bench-floor-before")
	floorSpent := floorCPU()
	// The runner's peak memory: what earlier phases freed goes back to the
	// OS and the high-water mark is set back to the resident set left, so
	// the peak is the BatchHandler run's (the test process also holds the
	// rows it produced, about 100 B each).
	debug.FreeOSMemory()
	_ = proc.ResetPeakRSS(os.Getpid())
	memStart, _ := proc.ReadUsage(os.Getpid())
	batchCPU := cpu.start()
	batchProfile := profileCPU(n)
	consumerRate := phase("batch", func() float64 { return consume(idempotent.Config{BatchHandler: batchHandler}) })
	whereItWent := batchProfile()
	batchSpent := batchCPU()
	mem, _ := proc.ReadUsage(os.Getpid())
	batchRun := batchStats
	floorAfter := floor("bench-floor-after")
	floorRate := (floorBefore + floorAfter) / 2
	// The same database work fed from the broker: what reading the records
	// costs the machine (the broker's fetch work, franz-go's, a
	// transaction per partition's batch) with nothing decoded. A consumer
	// that applies a partition's batch per transaction does no better here.
	fetchFed := func(name, group string, cl *kgo.Client) (float64, cpuSpent) {
		emptyRows()
		spent := cpu.start()
		rate := phase(name, func() float64 {
			rate, err := fetchWithDedupe(ctx, cl, pool, group, rows, parallel, batchSize)
			if err != nil {
				b.Fatal(err)
			}
			return rate
		})
		return rate, spent()
	}
	fetchOpts := []kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxPartitionBytes(4 << 20), kgo.FetchMaxBytes(int32(idempotent.DefaultMaxBufferedBytes / 4))}
	fetchRate, fetchSpent := fetchFed("fetch+raw+dedupe", "bench-fetch-bound", k.Client(b, fetchOpts...))
	// The same over the local stack's read-only plaintext listener: what
	// TLS costs of it. (It cannot serve the consumer: the listener's
	// principal may not join a group.)
	plainLine := "not measured: CONCORD_KAFKA_PLAINTEXT_BROKERS (the local stack's read-only listener) is not set"
	if brokers := os.Getenv("CONCORD_KAFKA_PLAINTEXT_BROKERS"); brokers != "" {
		cl, err := kgo.NewClient(append(fetchOpts, kgo.SeedBrokers(kit.SplitBrokers(brokers)...))...)
		if err != nil {
			b.Fatal(err)
		}
		plainRate, plainSpent := fetchFed("plaintext-fetch+raw+dedupe", "bench-fetch-plaintext", cl)
		b.ReportMetric(plainRate, "plaintext-fetch-fed-raw+dedupe-rows/s")
		plainLine = fmt.Sprintf("%8.0f rows/s = %.2f of raw+dedupe; CPU seconds per 1,000 rows: %s", plainRate, plainRate/floorRate, plainSpent.per(n))
	}
	// The same again with tracing on: franz-go's receive span and the
	// runner's process span per event, exported over OTLP to an
	// in-process collector that discards them. Tracing stays on from
	// here; the baselines below make no spans.
	sink, err := otlpsink.Start(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sink.Close(context.Background()) })
	tracedRate := phase("traced", func() float64 { return consume(idempotent.Config{BatchHandler: batchHandler}) })
	if err := sink.Flush(ctx); err != nil {
		b.Fatal(err)
	}

	// Baseline: the same rows, batched INSERTs, same parallelism, no Kafka.
	emptyRows()
	rawRate := phase("raw", func() float64 {
		rawStart := time.Now()
		if err := insertRaw(ctx, pool, rows, parallel, batchSize); err != nil {
			b.Fatal(err)
		}
		return float64(n) / time.Since(rawStart).Seconds()
	})

	b.StopTimer()

	b.ReportMetric(consumerRate, "events/s")
	b.ReportMetric(perEventRate, "per-event-handler-events/s")
	b.ReportMetric(tracedRate, "traced-events/s")
	b.ReportMetric(rawRate, "raw-rows/s")
	b.ReportMetric(floorRate, "raw+dedupe-rows/s")
	b.ReportMetric(fetchRate, "fetch-fed-raw+dedupe-rows/s")
	fmt.Printf("\nconsumer benchmark: %d events of ~1 KiB over %d partitions, handler inserts one row\n", n, partitions)
	fmt.Printf("  load average at start: %s, at end: %s\n", loadStart, testkit.LoadAverage())
	fmt.Printf("  applied with dedupe, BatchHandler (Kafka → validate → processed_events + pgx batch of the INSERTs, batches of ≤%d, %d partitions in parallel): %8.0f events/s\n", batchSize, parallel, consumerRate)
	fmt.Printf("  peak RSS of the benchmark process during the BatchHandler run: %.0f MiB (%.0f MiB at its start); the runner held at most %.0f MiB of polled records (MaxBufferedBytes %d MiB), %d batches of %.0f events on average\n",
		float64(mem.PeakRSS)/(1<<20), float64(memStart.RSS)/(1<<20), float64(batchRun.PeakBufferedBytes)/(1<<20), idempotent.DefaultMaxBufferedBytes>>20,
		batchRun.Batches, float64(batchRun.Applied)/float64(max(batchRun.Batches, 1)))
	fmt.Printf("  the same BatchHandler with tracing on (receive + process span per event, OTLP to an in-process no-op collector):     %8.0f events/s (%.2f x untraced; %s)\n", tracedRate, tracedRate/consumerRate, sink.Stats())
	fmt.Printf("  applied with dedupe, per-event Handler (one INSERT round trip per event, otherwise the same):                       %8.0f events/s\n", perEventRate)
	fmt.Printf("  raw batched INSERT of the same rows (pgx batch of %d per tx, %d in parallel, no Kafka, no dedupe):  %8.0f rows/s\n", batchSize, parallel, rawRate)
	fmt.Printf("  the same INSERTs plus the dedupe rows (one unnest INSERT into processed_events per tx), no Kafka, no decoding:          %8.0f rows/s (%.0f just before the BatchHandler run, %.0f just after)\n", floorRate, floorBefore, floorAfter)
	fmt.Printf("  the same database work fed by fetching the records from the broker (the runner's fetch settings, nothing decoded):    %8.0f rows/s = %.2f of raw+dedupe, what reading the records leaves of it on this machine\n",
		fetchRate, fetchRate/floorRate)
	fmt.Printf("  CPU seconds per 1,000 events, BatchHandler run: %s\n", batchSpent.per(n))
	fmt.Printf("  CPU seconds per 1,000 rows, fetch-fed raw+dedupe: %s\n", fetchSpent.per(n))
	fmt.Printf("  the same fed over the broker's read-only plaintext listener (no TLS): %s\n", plainLine)
	fmt.Printf("  where the bench process's CPU went in the BatchHandler run (its CPU profile), µs per event: %s\n", whereItWent)
	fmt.Printf("  CPU seconds per 1,000 rows, raw+dedupe just before it: %s\n", floorSpent.per(n))
	fmt.Printf("  the same as a ratio of CPU, which the machine's other work does not move: the ceiling's CPU per row ÷ the BatchHandler run's per event, the processes named: %.2f (÷ the fetch-fed raw+dedupe's per row: %.2f)\n",
		floorSpent.ours().Seconds()/max(batchSpent.ours().Seconds(), 1e-9), floorSpent.ours().Seconds()/max(fetchSpent.ours().Seconds(), 1e-9))
	fmt.Printf("  ratio: %.2f of raw+dedupe (target ≥ 0.80), %.2f of the fetch-fed raw+dedupe, %.2f of raw; target ≥ 20000 events/s\n\n",
		consumerRate/floorRate, consumerRate/fetchRate, consumerRate/rawRate)
}

const insertBenchDedupe = `INSERT INTO processed_events (consumer_group, event_id, topic, partition, "offset")
SELECT $3, e.id, 'bench', 0, e.off FROM unnest($1::uuid[], $2::bigint[]) AS e(id, off)
ON CONFLICT (consumer_group, event_id) DO NOTHING RETURNING event_id`

// insertRawWithDedupe writes rows and their dedupe rows under group, which
// must be new: rows already there would make the inserts cheaper.
func insertRawWithDedupe(ctx context.Context, pool *pgxpool.Pool, group string, rows []benchRow, parallel, batchSize int) error {
	return insertChunks(ctx, pool, rows, parallel, batchSize, writeWithDedupe(ctx, group))
}

// writeWithDedupe writes a chunk of rows and their dedupe rows under group
// in one transaction: the database work of a consumer's batch.
func writeWithDedupe(ctx context.Context, group string) func(pgx.Tx, []benchRow) error {
	return func(tx pgx.Tx, chunk []benchRow) error {
		ids := make([][16]byte, len(chunk)) // as the runner sends them
		offs := make([]int64, len(chunk))
		for i, r := range chunk {
			ids[i], offs[i] = r.id, r.seq
		}
		rs, err := tx.Query(ctx, insertBenchDedupe, ids, offs, group)
		if err != nil {
			return err
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return err
		}
		var bt pgx.Batch
		for _, r := range chunk {
			bt.Queue(insertBenchRow, r.id, r.agg, r.seq, r.at)
		}
		return tx.SendBatch(ctx, &bt).Close()
	}
}

// fetchWithDedupe is the same database work as insertRawWithDedupe, fed
// by fetching the records cl consumes instead of from memory (a client
// with the runner's fetch settings; it is closed), a chunk of at most
// batchSize of one partition's records at a time, as the runner batches
// them. Nothing is decoded or validated; each record fetched releases the
// next row. It returns the rate from the first fetch with records, as the
// consumer's is taken from its first applied event.
func fetchWithDedupe(ctx context.Context, cl *kgo.Client, pool *pgxpool.Pool, group string, rows []benchRow, parallel, batchSize int) (float64, error) {
	defer cl.Close()
	var first time.Time
	err := insertFed(ctx, pool, parallel, func(work chan<- []benchRow) error {
		next := 0
		for next < len(rows) {
			fs := cl.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				return err
			}
			if first.IsZero() && fs.NumRecords() > 0 {
				first = time.Now()
			}
			fs.EachPartition(func(p kgo.FetchTopicPartition) {
				for i := 0; i < len(p.Records); i += batchSize {
					m := min(batchSize, len(p.Records)-i, len(rows)-next)
					work <- rows[next : next+m]
					next += m
				}
			})
		}
		return nil
	}, writeWithDedupe(ctx, group))
	return float64(len(rows)) / time.Since(first).Seconds(), err
}

func insertRaw(ctx context.Context, pool *pgxpool.Pool, rows []benchRow, parallel, batchSize int) error {
	return insertChunks(ctx, pool, rows, parallel, batchSize, func(tx pgx.Tx, chunk []benchRow) error {
		var bt pgx.Batch
		for _, r := range chunk {
			bt.Queue(insertBenchRow, r.id, r.agg, r.seq, r.at)
		}
		return tx.SendBatch(ctx, &bt).Close()
	})
}

// insertChunks runs write on chunks of batchSize rows, one transaction
// each, parallel at a time.
func insertChunks(ctx context.Context, pool *pgxpool.Pool, rows []benchRow, parallel, batchSize int, write func(pgx.Tx, []benchRow) error) error {
	return insertFed(ctx, pool, parallel, func(work chan<- []benchRow) error {
		for i := 0; i < len(rows); i += batchSize {
			work <- rows[i:min(i+batchSize, len(rows))]
		}
		return nil
	}, write)
}

// insertFed runs write, one transaction each and parallel at a time, on
// the chunks feed sends until it returns.
func insertFed(ctx context.Context, pool *pgxpool.Pool, parallel int, feed func(chan<- []benchRow) error, write func(pgx.Tx, []benchRow) error) error {
	work := make(chan []benchRow)
	errs := make(chan error, parallel+1)
	var wg sync.WaitGroup
	for w := 0; w < parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for chunk := range work {
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return write(tx, chunk) })
				if err != nil {
					select { // keep draining so the sender never blocks
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	if err := feed(work); err != nil {
		errs <- err
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}

// cpuMeter reads the CPU time of the processes a phase of the benchmark
// keeps busy: this one (runner, franz-go, pgx, the handler), the
// PostgreSQL backends serving the benchmark's database (the server is
// shared with whatever else uses the stack; its other backends and its
// background writers are left out) and the broker (shared, counted whole).
type cpuMeter struct {
	pool *pgxpool.Pool
	pids map[string]int // this process, the broker when found
}

// cpuSpent is the CPU time of each process over a phase, and of the whole
// machine.
type cpuSpent struct {
	names   []string
	by      map[string]time.Duration
	machine time.Duration
	wall    time.Duration
}

const backendsName = "postgresql (the database's backends)"

func newCPUMeter(b *testing.B, pool *pgxpool.Pool, broker string) cpuMeter {
	m := cpuMeter{pool: pool, pids: map[string]int{"bench process": os.Getpid()}}
	_, port, err := net.SplitHostPort(broker)
	if err == nil {
		var p, pid int
		if p, err = strconv.Atoi(port); err == nil {
			if pid, err = proc.ListenerPID(p); err == nil {
				m.pids["kafka (shared)"] = pid
			}
		}
	}
	if err != nil {
		b.Logf("the broker's CPU is not measured: %v", err)
	}
	return m
}

func (m cpuMeter) read() (map[string]time.Duration, time.Duration) {
	by := map[string]time.Duration{}
	for name, pid := range m.pids {
		if u, err := proc.TreeUsage(pid); err == nil {
			by[name] = u.CPU
		}
	}
	var pids []int32
	if err := m.pool.QueryRow(context.Background(),
		`SELECT array_agg(pid) FROM pg_stat_activity WHERE datname = current_database()`).Scan(&pids); err == nil {
		for _, pid := range pids {
			if u, err := proc.ReadUsage(int(pid)); err == nil {
				by[fmt.Sprintf("%s/%d", backendsName, pid)] = u.CPU
			}
		}
	}
	machine, _ := proc.MachineCPU()
	return by, machine
}

// start begins a phase; the function it returns ends it.
func (m cpuMeter) start() func() cpuSpent {
	before, machineBefore := m.read()
	t0 := time.Now()
	return func() cpuSpent {
		after, machineAfter := m.read()
		s := cpuSpent{by: map[string]time.Duration{}, machine: machineAfter - machineBefore, wall: time.Since(t0)}
		for key, d := range after {
			name, _, _ := strings.Cut(key, "/") // a backend that started meanwhile counts from 0
			if _, ok := s.by[name]; !ok {
				s.names = append(s.names, name)
			}
			s.by[name] += d - before[key]
		}
		slices.Sort(s.names)
		return s
	}
}

// ours is the CPU time of the processes named.
func (s cpuSpent) ours() time.Duration {
	var d time.Duration
	for _, name := range s.names {
		d += s.by[name]
	}
	return d
}

func (s cpuSpent) per(n int) string {
	var parts []string
	for _, name := range s.names {
		parts = append(parts, fmt.Sprintf("%s %.3f", name, s.by[name].Seconds()*1000/float64(n)))
	}
	ours := s.ours()
	return fmt.Sprintf("%s; the machine %.3f (%.0f%% of its %d cores busy over %.1f s, %.0f%% of that by the processes named)",
		strings.Join(parts, ", "), s.machine.Seconds()*1000/float64(n),
		100*proc.BusyShare(s.machine, s.wall), runtime.NumCPU(), s.wall.Seconds(),
		100*ours.Seconds()/max(s.machine.Seconds(), 1e-9))
}
