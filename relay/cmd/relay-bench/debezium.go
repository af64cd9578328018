package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/infra/testkit/proc"
	"github.com/concordhq/concord/relay/internal/relaytest"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
)

// debeziumPeer is the run of Debezium's PostgreSQL connector with its
// outbox event router on a standalone Kafka Connect worker (one JVM, the
// publishing process), over the bench's own database and outbox table.
type debeziumPeer struct {
	classpath string // the jars; "" runs peers/debezium/fetch for them
	heap      string // the JVM's -Xmx
	kcfg      kit.KafkaConfig
	dbURL     string
	pool      *pgxpool.Pool
	adm       *kadm.Client
}

// debeziumResult is what the peer measured.
type debeziumResult struct {
	drainRate  float64
	latency    latencyRun
	peakRSS    int64
	heap       string
	startup    time.Duration
	mismatches []string // how its records differ from Concord's, one line each
}

const connectorName = "concord-outbox"

// run measures the peer: the backlog appended while the connector is
// stopped and then drained, and commit-to-ack at the offered rate. An
// error means the peer did not run to the end; the bench goes on without
// it.
func (d debeziumPeer) run(ctx context.Context, rows []outbox.Record, rate int, rateFor time.Duration, payload, partitions int) (res debeziumResult, err error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return res, fmt.Errorf("no java on PATH (Kafka Connect needs Java 17): %w", err)
	}
	if d.classpath == "" {
		if d.classpath, err = fetchDebezium(ctx); err != nil {
			return res, err
		}
	}
	db, err := parseDBTarget(d.dbURL)
	if err != nil {
		return res, err
	}

	// A topic of its own, with the broker's append time as each record's
	// timestamp: Connect has no per-record acknowledgement hook, so the
	// broker's append stands for the ack.
	writer := outbox.Writer{TopicPrefix: "relay-bench-dbz-" + uuid.NewString()[:8] + "."}
	_, probe, err := writer.Prepare(outbox.Event{Payload: relaytest.Data(uuid.NewString(), 0, 0)})
	if err != nil {
		return res, err
	}
	topic := probe.Topic
	appendTime := "LogAppendTime"
	resp, err := d.adm.CreateTopic(ctx, int32(partitions), 1, map[string]*string{"message.timestamp.type": &appendTime}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return res, fmt.Errorf("create topic %s: %w", topic, err)
	}
	defer d.adm.DeleteTopics(context.WithoutCancel(ctx), topic) //nolint:errcheck
	backlog := make([]outbox.Record, len(rows))
	for i, r := range rows {
		r.Topic = topic
		backlog[i] = r
	}

	dir, err := os.MkdirTemp("", "relay-bench-debezium-")
	if err != nil {
		return res, err
	}
	defer func() {
		if err == nil { // a failed run keeps its configuration and the Connect log
			os.RemoveAll(dir)
		}
	}()
	ports, err := kit.FreePorts(1)
	if err != nil {
		return res, err
	}
	slot := "relay_bench_dbz_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	worker, err := connectWorker(d.kcfg, filepath.Join(dir, "offsets"), ports[0])
	if err != nil {
		return res, err
	}
	files := map[string]string{
		"worker.properties":    worker.String(),
		"connector.properties": debeziumConnector(connectorName, db, slot).String(),
		"log4j2.properties":    connectLogging,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			return res, err
		}
	}
	if _, err := d.pool.Exec(ctx, "truncate outbox"); err != nil {
		return res, err
	}

	started := time.Now()
	p, err := proc.Run(proc.Command{Name: "kafka-connect", Path: java, Dir: dir, Log: filepath.Join(dir, "connect.log"),
		Args: []string{"-Xms256m", "-Xmx" + d.heap, "-Dlog4j2.configurationFile=" + filepath.Join(dir, "log4j2.properties"),
			"-cp", d.classpath, "org.apache.kafka.connect.cli.ConnectStandalone", "worker.properties", "connector.properties"}})
	if err != nil {
		return res, err
	}
	defer func() {
		_ = p.Stop(syscall.SIGTERM, 30*time.Second)
		dropSlot(d.pool, slot)
		_, _ = d.pool.Exec(context.WithoutCancel(ctx), "drop publication if exists "+slot)
	}()
	withLog := func(err error) error {
		return fmt.Errorf("%w\nlast lines of the Connect log:\n%s", err, strings.TrimSpace(p.LogTail(1500)))
	}
	rest := connectREST{base: fmt.Sprintf("http://127.0.0.1:%d/connectors/%s", ports[0], connectorName)}
	if err := d.waitStreaming(ctx, p, rest, slot, true); err != nil {
		return res, withLog(err)
	}
	res.startup = time.Since(started)

	cl, err := kit.NewKafkaClient(ctx, d.kcfg, nil, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return res, err
	}
	defer cl.Close()
	want := make(map[string]outbox.Record, len(backlog))
	for _, r := range backlog {
		want[r.EventID] = r
	}
	col := newAppendLog(want, partitions)
	cctx, stopConsuming := context.WithCancel(ctx)
	consumed := make(chan struct{})
	go func() { defer close(consumed); col.consume(cctx, cl) }()
	defer func() { stopConsuming(); <-consumed }()

	// Backlog: appended with the connector stopped (its slot keeps the
	// changes), then drained after it resumes.
	if err := rest.put(ctx, "stop"); err != nil {
		return res, withLog(err)
	}
	if err := d.waitStreaming(ctx, p, rest, slot, false); err != nil {
		return res, withLog(err)
	}
	if err := appendBacklog(ctx, d.pool, backlog); err != nil {
		return res, err
	}
	if err := rest.put(ctx, "resume"); err != nil {
		return res, withLog(err)
	}
	if err := col.waitFor(ctx, p, len(backlog), 5*time.Minute); err != nil {
		return res, withLog(err)
	}
	first, last := col.span()
	res.drainRate = float64(len(backlog)-1) / last.Sub(first).Seconds()
	res.mismatches = col.differences()

	// Commit-to-ack at the offered rate, from each row's created_at (as
	// Concord's relay measures it) to the broker's append time.
	if _, err := d.pool.Exec(ctx, "truncate outbox"); err != nil {
		return res, err
	}
	col.reset()
	o, err := offer(ctx, d.pool, writer, rate, rateFor, payload)
	if err != nil {
		return res, err
	}
	if err := col.waitFor(ctx, p, len(o.ids), time.Minute); err != nil {
		return res, withLog(err)
	}
	lat, err := col.latencies(ctx, d.pool)
	if err != nil {
		return res, err
	}
	res.latency = latencyRun{p50: lat[len(lat)/2], p99: lat[len(lat)*99/100], offered: o, duplicates: col.duplicates()}

	u, err := proc.ReadUsage(p.PID())
	if err != nil {
		return res, err
	}
	res.peakRSS, res.heap = u.PeakRSS, d.heap
	return res, nil
}

// waitStreaming waits (3 minutes at most, the JVM's start included) until
// the connector's task runs and its slot is active, or, with want false,
// until the connector is stopped and the slot released.
func (d debeziumPeer) waitStreaming(ctx context.Context, p *proc.Process, rest connectREST, slot string, want bool) error {
	what := "the connector streaming"
	if !want {
		what = "the connector stopped"
	}
	var failed error // a failed connector stays failed: stop waiting
	err := p.WaitFor(ctx, 3*time.Minute, what, func(ctx context.Context) error {
		st, err := rest.status(ctx)
		if err != nil {
			return err
		}
		if failed = st.failed(); failed != nil {
			return nil
		}
		var active bool
		if err := d.pool.QueryRow(ctx, "select coalesce((select active from pg_replication_slots where slot_name = $1), false)", slot).Scan(&active); err != nil {
			return err
		}
		if want && (!st.running() || !active) || !want && (st.Connector.State != "STOPPED" || active) {
			return fmt.Errorf("connector %s, slot active %v", st.Connector.State, active)
		}
		return nil
	})
	return errors.Join(err, failed)
}

// fetchDebezium runs peers/debezium/fetch (relative to the relay module,
// where `make bench-relay` runs the bench) and returns the classpath it
// prints.
func fetchDebezium(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join("peers", "debezium", "fetch"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("peers/debezium/fetch: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// parseDBTarget reads the connector's database settings the way pgx reads
// the URL (keyword/value strings and PG* defaults included). The
// connector's JDBC driver needs TCP, not a Unix socket.
func parseDBTarget(dbURL string) (dbTarget, error) {
	cfg, err := pgconn.ParseConfig(dbURL)
	if err != nil {
		return dbTarget{}, fmt.Errorf("database URL: %w", err)
	}
	if strings.HasPrefix(cfg.Host, "/") {
		return dbTarget{}, fmt.Errorf("database URL: host %s is a Unix socket; the connector needs a TCP host", cfg.Host)
	}
	return dbTarget{host: cfg.Host, port: strconv.Itoa(int(cfg.Port)), user: cfg.User, password: cfg.Password, name: cfg.Database}, nil
}

// connectLogging keeps the worker's log to warnings, plus the lines that
// say where the connector is.
const connectLogging = `rootLogger.level=WARN
rootLogger.appenderRef.stdout.ref=STDOUT
appender.stdout.type=Console
appender.stdout.name=STDOUT
appender.stdout.layout.type=PatternLayout
appender.stdout.layout.pattern=%d{ISO8601} %p %c{1}: %m%n
logger.debezium.name=io.debezium
logger.debezium.level=INFO
`

// connectREST is the worker's REST resource of one connector.
type connectREST struct{ base string }

type connectStatus struct {
	Connector struct {
		State string `json:"state"`
		Trace string `json:"trace"`
	} `json:"connector"`
	Tasks []struct {
		State string `json:"state"`
		Trace string `json:"trace"`
	} `json:"tasks"`
}

func (s connectStatus) running() bool {
	return s.Connector.State == "RUNNING" && len(s.Tasks) > 0 && s.Tasks[0].State == "RUNNING"
}

func (s connectStatus) failed() error {
	trace := s.Connector.Trace
	if s.Connector.State != "FAILED" {
		trace = ""
		for _, t := range s.Tasks {
			if t.State == "FAILED" {
				trace = t.Trace
			}
		}
		if trace == "" {
			return nil
		}
	}
	first, _, _ := strings.Cut(trace, "\n")
	return fmt.Errorf("connector failed: %s", first)
}

func (r connectREST) status(ctx context.Context) (connectStatus, error) {
	var st connectStatus
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+"/status", nil)
	if err != nil {
		return st, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET %s/status: %s", r.base, resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// put is PUT <connector>/<action> (stop, resume).
func (r connectREST) put(ctx context.Context, action string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, r.base+"/"+action, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("PUT %s/%s: %w", r.base, action, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("PUT %s/%s: %s", r.base, action, resp.Status)
	}
	return nil
}

// appendLog is the broker's append time of each consumed record, by event
// id, and how the records differ from what Concord's relay publishes for
// the same rows.
type appendLog struct {
	want       map[string]outbox.Record // the rows checked against, by event id
	partitions int
	// partitioner is Concord's relay's, to check that the peer's records
	// land on the partitions Concord's would.
	partitioner kgo.TopicPartitioner

	mu         sync.Mutex
	at         map[string]time.Time
	dups       int // records of an event already appended
	mismatches []string
	seen       map[string]bool // mismatch kinds already noted
}

func newAppendLog(want map[string]outbox.Record, partitions int) *appendLog {
	return &appendLog{want: want, partitions: partitions, partitioner: kgo.StickyKeyPartitioner(nil).ForTopic(""),
		at: map[string]time.Time{}, seen: map[string]bool{}}
}

func (a *appendLog) reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.at = map[string]time.Time{}
	a.dups = 0
}

// differences is how the records differed from Concord's, one line a kind.
func (a *appendLog) differences() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.mismatches)
}

func (a *appendLog) duplicates() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.dups
}

func (a *appendLog) consume(ctx context.Context, cl *kgo.Client) {
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		fs.EachRecord(a.add)
	}
}

func (a *appendLog) add(r *kgo.Record) {
	id := ""
	for _, h := range r.Headers {
		if h.Key == schemas.HeaderEventID {
			id = string(h.Value)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, dup := a.at[id]; dup {
		a.dups++
	} else if id != "" { // counted as an event, it could end a wait early
		a.at[id] = r.Timestamp
	}
	if want, ok := a.want[id]; ok {
		wr := kafkaRecord(want)
		diff := recordDiff(wr, r)
		if p := a.partitioner.Partition(wr, a.partitions); int32(p) != r.Partition {
			diff = append(diff, "partition differs")
		}
		for _, m := range diff {
			if !a.seen[m] {
				a.seen[m] = true
				a.mismatches = append(a.mismatches, m)
			}
		}
	} else if !a.seen["no event id"] && id == "" {
		a.seen["no event id"] = true
		a.mismatches = append(a.mismatches, "a record without an "+schemas.HeaderEventID+" header")
	}
}

func (a *appendLog) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.at)
}

// waitFor polls until n distinct events were appended or the Connect
// worker exited.
func (a *appendLog) waitFor(ctx context.Context, p *proc.Process, n int, limit time.Duration) error {
	return p.WaitFor(ctx, limit, fmt.Sprintf("%d events on Kafka", n), func(context.Context) error {
		if got := a.count(); got < n {
			return fmt.Errorf("%d of %d", got, n)
		}
		return nil
	})
}

// span is the first and last append time.
func (a *appendLog) span() (first, last time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, t := range a.at {
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	return first, last
}

// latencies are, sorted, each appended event's append time less its row's
// created_at.
func (a *appendLog) latencies(ctx context.Context, pool *pgxpool.Pool) ([]time.Duration, error) {
	rows, err := pool.Query(ctx, "select event_id::text, created_at from outbox")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	a.mu.Lock()
	defer a.mu.Unlock()
	var lat []time.Duration
	for rows.Next() {
		var id string
		var created time.Time
		if err := rows.Scan(&id, &created); err != nil {
			return nil, err
		}
		if at, ok := a.at[id]; ok {
			lat = append(lat, at.Sub(created))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(lat) == 0 {
		return nil, errors.New("no appended event matched a row")
	}
	slices.Sort(lat)
	return lat, nil
}

// recordDiff says how got differs from want in key, value and headers
// (topic aside: the peer publishes to a topic of its own), one line per
// difference, in words that do not depend on the record.
func recordDiff(want *kgo.Record, got *kgo.Record) []string {
	var out []string
	if !bytes.Equal(want.Key, got.Key) {
		out = append(out, "key differs")
	}
	if !bytes.Equal(want.Value, got.Value) {
		out = append(out, "value differs")
	}
	headers := func(r *kgo.Record) map[string]string {
		m := map[string]string{}
		for _, h := range r.Headers {
			m[h.Key] = string(h.Value)
		}
		return m
	}
	w, g := headers(want), headers(got)
	for k, v := range w {
		switch gv, ok := g[k]; {
		case !ok:
			out = append(out, "header "+k+" missing")
		case gv != v:
			out = append(out, "header "+k+" differs")
		}
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			out = append(out, "extra header "+k)
		}
	}
	slices.Sort(out)
	return out
}

// printDebezium prints the peer's figures, or why it did not run.
func printDebezium(res debeziumResult, err error, pollRate float64, rate int) {
	if err != nil {
		fmt.Printf("  debezium: not run: %v\n", err)
		return
	}
	fmt.Printf("  debezium         backlog drained:                             %9.0f events/s (%s; first to last broker append)\n",
		res.drainRate, ofPoll(res.drainRate, pollRate))
	fmt.Printf("  debezium         commit-to-ack at %d events/s offered (%s (created_at to broker append time, ms resolution)\n",
		rate, res.latency)
	fmt.Printf("  debezium process Kafka Connect JVM (-Xmx%s), up and streaming in %s: peak RSS %.0f MiB\n",
		res.heap, res.startup.Round(100*time.Millisecond), float64(res.peakRSS)/(1<<20))
	if len(res.mismatches) == 0 {
		fmt.Printf("  debezium         records: same partition, key, value and headers as Concord's relay gives them\n")
	} else {
		fmt.Printf("  debezium         records differ from Concord's: %s\n", strings.Join(res.mismatches, "; "))
	}
}
