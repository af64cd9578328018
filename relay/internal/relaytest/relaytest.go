// Package relaytest holds the relay's integration-test helpers: filling an
// outbox with sequenced events, consuming a topic while checking per-key
// order, the parked-row scenario both relay modes are tested with, and
// running the relay binary as a real process.
package relaytest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/infra/testkit/proc"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas/contract"
)

// Keys returns n distinct partition keys (order ids are UUIDs in the schema).
func Keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = uuid.NewString()
	}
	return out
}

// Data is an order.created payload whose total_amount carries a per-key
// sequence number (what the checker reads) and whose customer id carries
// pad bytes of padding.
func Data(key string, seq int, pad int) contract.OrderCreatedV2 {
	return contract.OrderCreatedV2{
		OrderID: key, CustomerID: "cus_" + strings.Repeat("x", pad), Currency: "EUR", TotalAmount: int64(seq),
		Items: []contract.OrderCreatedV2Item{{SKU: "SKU-1", Quantity: 1, UnitPrice: 100}},
	}
}

// Fill appends perKey events for every key, round-robin over the keys (so
// one key's rows are spread over the id range), with seq 1..perKey per key,
// to topic instead of the catalog's. It COPYs validated rows in chunks and
// notifies once per chunk. It returns the rows in id order.
func Fill(t testing.TB, pool *pgxpool.Pool, topic string, keys []string, perKey, pad int) {
	t.Helper()
	FillSeqs(t, pool, topic, keys, 1, perKey, pad, 5000)
}

// FillSeqs is Fill with seq from..to of every key, committing every chunk
// rows in its own transaction.
func FillSeqs(t testing.TB, pool *pgxpool.Pool, topic string, keys []string, from, to, pad, chunk int) {
	t.Helper()
	ctx := context.Background()
	var recs [][]any
	flush := func() {
		if len(recs) == 0 {
			return
		}
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"outbox"}, outbox.Columns, pgx.CopyFromRows(recs)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "select pg_notify($1, '')", outbox.NotifyChannel)
			return err
		})
		if err != nil {
			t.Fatalf("fill outbox: %v", err)
		}
		recs = recs[:0]
	}
	for seq := from; seq <= to; seq++ {
		for _, k := range keys {
			_, rec, err := outbox.Prepare(outbox.Event{Payload: Data(k, seq, pad)})
			if err != nil {
				t.Fatal(err)
			}
			rec.Topic = topic
			recs = append(recs, rec.Values())
			if len(recs) == chunk {
				flush()
			}
		}
	}
	flush()
}

// Append inserts one event through outbox.Append (the services' path) to
// topic, returning the row id.
func Append(t testing.TB, pool *pgxpool.Pool, topic, key string, seq, pad int) int64 {
	t.Helper()
	id, err := TryAppend(pool, topic, key, seq, pad)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TryAppend is Append returning its error (for a database coming back).
func TryAppend(pool *pgxpool.Pool, topic, key string, seq, pad int) (int64, error) {
	ctx := context.Background()
	var id int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		env, err := outbox.Append(ctx, tx, outbox.Event{Payload: Data(key, seq, pad)})
		if err != nil {
			return err
		}
		return tx.QueryRow(ctx, "update outbox set topic = $2 where event_id = $1 returning id", env.EventID, topic).Scan(&id)
	})
	return id, err
}

// Checker consumes a topic from the start and checks per-key order: the
// first time seq n of a key shows up, seqs 1..n-1 of that key must already
// have shown up. Re-deliveries (at least once) are allowed and counted.
type Checker struct {
	t      testing.TB
	cl     *kgo.Client
	topic  string
	mu     sync.Mutex
	next   map[int32]int64 // per partition, the offset after the last record read
	seen   map[string]map[int]bool
	maxSeq map[string]int
	skip   map[string]map[int]bool
	dups   int
	total  int
	errs   []string
}

// NewChecker starts consuming topic on k.
func NewChecker(t testing.TB, k *testkit.Kafka, topic string) *Checker {
	t.Helper()
	cl := k.Client(t, kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	return &Checker{t: t, cl: cl, topic: topic, next: map[int32]int64{}, seen: map[string]map[int]bool{},
		maxSeq: map[string]int{}, skip: map[string]map[int]bool{}}
}

// Skipped tells the checker that seq of key was skipped by an operator and
// will never arrive, so the next seq may follow the one before it.
func (c *Checker) Skipped(key string, seq int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.skip[key] == nil {
		c.skip[key] = map[int]bool{}
	}
	c.skip[key][seq] = true
}

// WaitAll polls until every key reached perKey, failing the test on an order
// violation or at the deadline.
func (c *Checker) WaitAll(keys []string, perKey int, timeout time.Duration) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		if c.done(keys, perKey) {
			return
		}
		fs := c.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			c.t.Fatalf("after %s: %s", timeout, c.Summary(keys, perKey))
		}
		fs.EachRecord(c.record)
		c.mu.Lock()
		errs := c.errs
		c.mu.Unlock()
		if len(errs) > 0 {
			c.t.Fatalf("per-key order broken: %s", strings.Join(errs[:min(len(errs), 5)], "; "))
		}
	}
}

// Poll consumes what is there for up to d (used to look at a topic without
// expecting completion).
func (c *Checker) Poll(d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for ctx.Err() == nil {
		c.cl.PollFetches(ctx).EachRecord(c.record)
	}
}

// ReadToEnd consumes until it has read every record the topic holds now
// (its end offsets, asked of the broker when ReadToEnd is called), failing
// the test after timeout.
func (c *Checker) ReadToEnd(timeout time.Duration) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ends, err := kadm.NewClient(c.cl).ListEndOffsets(ctx, c.topic)
	if err != nil {
		c.t.Fatalf("end offsets of %s: %v", c.topic, err)
	}
	behind := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		n := 0
		ends.Each(func(o kadm.ListedOffset) {
			if o.Offset > c.next[o.Partition] {
				n++
			}
		})
		return n
	}
	for behind() > 0 {
		fs := c.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			c.t.Fatalf("%d partitions of %s not read to their end within %s", behind(), c.topic, timeout)
		}
		fs.EachRecord(c.record)
	}
}

// Seen returns every (key, seq) read so far, re-deliveries once.
func (c *Checker) Seen() map[string]map[int]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]map[int]bool, len(c.seen))
	for k, seqs := range c.seen {
		out[k] = make(map[int]bool, len(seqs))
		for s := range seqs {
			out[k][s] = true
		}
	}
	return out
}

// Seq is the highest seq seen of key.
func (c *Checker) Seq(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.maxSeq[key]
}

// Errors are the order violations seen so far.
func (c *Checker) Errors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.errs...)
}

func (c *Checker) record(r *kgo.Record) {
	var env struct {
		Data struct {
			Seq int `json:"total_amount"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.Value, &env); err != nil {
		c.t.Errorf("record at %s/%d@%d: %v", r.Topic, r.Partition, r.Offset, err)
		return
	}
	key, seq := string(r.Key), env.Data.Seq
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total++
	c.next[r.Partition] = max(c.next[r.Partition], r.Offset+1)
	if c.seen[key] == nil {
		c.seen[key] = map[int]bool{}
	}
	c.seen[key][seq] = true
	m := c.maxSeq[key]
	for c.skip[key][m+1] {
		m++
	}
	switch {
	case seq == m+1:
		c.maxSeq[key] = seq
	case seq <= m:
		c.dups++
	default:
		c.errs = append(c.errs, fmt.Sprintf("key %s: seq %d arrived after %d (partition %d offset %d)", key, seq, m, r.Partition, r.Offset))
	}
}

func (c *Checker) done(keys []string, perKey int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		if c.maxSeq[k] < perKey {
			return false
		}
	}
	return true
}

// Summary says how far the keys got.
func (c *Checker) Summary(keys []string, perKey int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	complete, got := 0, 0
	for _, k := range keys {
		got += c.maxSeq[k]
		if c.maxSeq[k] >= perKey {
			complete++
		}
	}
	return fmt.Sprintf("%d/%d keys complete, %d/%d events in order, %d records consumed (%d re-deliveries), %d order errors",
		complete, len(keys), got, len(keys)*perKey, c.total, c.dups, len(c.errs))
}

// Published returns the (key, seq) of every row marked published, for
// comparison with Checker.Seen.
func Published(t testing.TB, pool *pgxpool.Pool) map[string]map[int]bool {
	t.Helper()
	rows, err := pool.Query(context.Background(), `select partition_key, (payload->'data'->>'total_amount')::int
		from outbox where published_at is not null`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[int]bool{}
	var key string
	var seq int
	if _, err := pgx.ForEachRow(rows, []any{&key, &seq}, func() error {
		if out[key] == nil {
			out[key] = map[int]bool{}
		}
		out[key][seq] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// Missing lists up to 5 (key, seq) of want that got lacks, and how many
// there are in all.
func Missing(want, got map[string]map[int]bool) (int, []string) {
	n := 0
	var some []string
	for k, seqs := range want {
		for s := range seqs {
			if !got[k][s] {
				n++
				if len(some) < 5 {
					some = append(some, fmt.Sprintf("%s#%d", k, s))
				}
			}
		}
	}
	return n, some
}

// Dups is the number of re-delivered records seen.
func (c *Checker) Dups() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dups
}

// WaitFor polls cond every 50ms until it returns nil or the timeout passes.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	testkit.Eventually(t, timeout, what, cond)
}

// Count returns a count(*) query's result.
func Count(t testing.TB, pool *pgxpool.Pool, query string, args ...any) int {
	t.Helper()
	return testkit.Count(t, pool, query, args...)
}

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

// BuildRelay builds the relay binary once per test process and returns its
// path.
func BuildRelay(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "relay-bin-")
		if err != nil {
			buildErr = err
			return
		}
		_, file, _, _ := runtime.Caller(0)
		modRoot := filepath.Join(filepath.Dir(file), "..", "..")
		buildBin = filepath.Join(dir, "relay")
		buildErr = proc.GoBuild(modRoot, buildBin, "./cmd/relay")
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

// StartRelay runs the relay binary with args (plus --http-addr=127.0.0.1:0
// and text logs to a file), killed when the test ends.
func StartRelay(t testing.TB, name, dbURL string, k *testkit.Kafka, args ...string) *proc.Process {
	t.Helper()
	all := append([]string{"--database-url", dbURL,
		"--http-addr", "127.0.0.1:0", "--rebalance-interval", "500ms", "--poll-interval", "500ms"}, args...)
	return proc.Start(t, proc.Command{Name: name, Path: BuildRelay(t), Args: all, Env: append(k.Env(), "LOG_LEVEL=info"),
		Log: filepath.Join(t.TempDir(), name+".log")})
}

// HTTPAddr waits for a relay to log the address of its ops server (it
// listens on an ephemeral port) and returns it.
func HTTPAddr(t testing.TB, p *proc.Process, timeout time.Duration) string {
	t.Helper()
	var addr string
	err := p.WaitFor(context.Background(), timeout, "logging its http address", func(context.Context) error {
		m := httpAddrRE.FindStringSubmatch(p.Log())
		if m == nil {
			return fmt.Errorf("not yet")
		}
		addr = m[1]
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

var httpAddrRE = regexp.MustCompile(`http listening.*?addr"?[=:]"?([0-9.]+:[0-9]+)`)

// WALTopic creates a unique topic (with the given topic configs) that outbox rows reach through a
// Writer's TopicPrefix, so events appended with the services' own path go
// to it in the inserted row itself (the WAL relay publishes the row as
// inserted; a later update of its topic is not in the stream).
func WALTopic(t testing.TB, k *testkit.Kafka, partitions int32, configs map[string]*string) (outbox.Writer, string) {
	t.Helper()
	_, rec, err := outbox.Prepare(outbox.Event{Payload: Data(Keys(1)[0], 1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	prefix := testkit.UniqueName(t, "wal") + "."
	topic := prefix + rec.Topic
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := k.Admin(t)
	resp, err := adm.CreateTopic(ctx, partitions, 1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopics(ctx, topic)
	})
	return outbox.Writer{TopicPrefix: prefix}, topic
}

// AppendWith appends one event with w (the services' path), returning the
// row id.
func AppendWith(t testing.TB, pool *pgxpool.Pool, w outbox.Writer, key string, seq, pad int) int64 {
	t.Helper()
	id, err := TryAppendWith(pool, w, key, seq, pad)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TryAppendWith appends one event with w (the services' path), returning
// the row id.
func TryAppendWith(pool *pgxpool.Pool, w outbox.Writer, key string, seq, pad int) (int64, error) {
	ctx := context.Background()
	var id int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		env, err := w.Append(ctx, tx, outbox.Event{Payload: Data(key, seq, pad)})
		if err != nil {
			return err
		}
		return tx.QueryRow(ctx, "select id from outbox where event_id = $1", env.EventID).Scan(&id)
	})
	return id, err
}

// DropSlotAtEnd drops a replication slot when the test ends, waiting for
// its walsender to go (registered before the relay, so it runs after the
// relay stopped, and before the database is dropped, which a slot on it
// would prevent).
func DropSlotAtEnd(t testing.TB, pool *pgxpool.Pool, slot string) {
	t.Helper()
	t.Cleanup(func() {
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := pool.Exec(context.Background(),
				"select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = $1", slot)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("drop replication slot %s: %v", slot, err)
				return
			}
			<-time.After(100 * time.Millisecond) // the walsender of a stopped relay is exiting
		}
	})
}

// AppendEach appends seq of every key with w (the services' path), one
// transaction per key, in keys' order.
func AppendEach(t testing.TB, pool *pgxpool.Pool, w outbox.Writer, keys []string, seq int) {
	t.Helper()
	for _, key := range keys {
		AppendWith(t, pool, w, key, seq, 0)
	}
}

// WaitAllPublished waits until no outbox row is left without published_at.
func WaitAllPublished(t testing.TB, pool *pgxpool.Pool, timeout time.Duration) {
	t.Helper()
	waitNoRow(t, pool, timeout, "every row marked published", "select count(*) from outbox where published_at is null")
}

// WaitAllDeleted waits until the outbox is empty: a WAL relay deletes the
// rows Kafka acknowledged.
func WaitAllDeleted(t testing.TB, pool *pgxpool.Pool, timeout time.Duration) {
	t.Helper()
	waitNoRow(t, pool, timeout, "every row deleted", "select count(*) from outbox")
}

// waitNoRow waits until count, a count(*) query, says 0.
func waitNoRow(t testing.TB, pool *pgxpool.Pool, timeout time.Duration, what, count string) {
	t.Helper()
	WaitFor(t, timeout, what, func() error {
		if n := Count(t, pool, count); n != 0 {
			return fmt.Errorf("%d rows left", n)
		}
		return nil
	})
}

// Poisoned is a key whose seq 2 its topic refuses as too large (a
// max.message.bytes of 4096, see SmallMessages) and keys that flow, for
// the tests of parked rows.
type Poisoned struct {
	Key    string
	Seqs   int   // seq 1..Seqs of Key are appended
	Bad    int64 // the row of seq 2 of Key
	Others []string
	PerKey int // seq 1..PerKey of every other key are appended
}

// SmallMessages is the topic config that refuses Poisoned's seq 2.
var SmallMessages = map[string]*string{"max.message.bytes": ptr("4096")}

func ptr[T any](v T) *T { return &v }

// AppendPoisoned appends seq 1..seqs of a new key, seq 2 of it larger
// than SmallMessages lets through, then seq 1..perKey of five other keys,
// each with add (which appends one event and returns its row id).
func AppendPoisoned(seqs, perKey int, add func(key string, seq, pad int) int64) Poisoned {
	p := Poisoned{Key: Keys(1)[0], Seqs: seqs, Others: Keys(5), PerKey: perKey}
	for seq := 1; seq <= seqs; seq++ {
		pad := 0
		if seq == 2 {
			pad = 8000
		}
		if id := add(p.Key, seq, pad); seq == 2 {
			p.Bad = id
		}
	}
	for seq := 1; seq <= perKey; seq++ {
		for _, k := range p.Others {
			add(k, seq, 0)
		}
	}
	return p
}

// ParkedThenSkipped checks what a relay with MaxAttempts 3 does with p:
// the other keys flow; the oversized row is parked after three refusals
// and never marked published, and its key's later rows wait behind it;
// once an operator skips it, they reach Kafka in order.
func (p Poisoned) ParkedThenSkipped(t testing.TB, pool *pgxpool.Pool, check *Checker) {
	t.Helper()
	ctx := context.Background()
	check.WaitAll(p.Others, p.PerKey, 60*time.Second)
	waiting := p.Seqs - 2
	WaitFor(t, 30*time.Second, "the oversized row parked, not marked published", func() error {
		if n := Count(t, pool, "select count(*) from outbox where id = $1 and published_at is not null", p.Bad); n != 0 {
			return fmt.Errorf("row %d marked published though Kafka never acknowledged it", p.Bad)
		}
		parked, err := outbox.Parked(ctx, pool)
		if err != nil {
			return err
		}
		if len(parked) != 1 || parked[0].ID != p.Bad {
			return fmt.Errorf("parked rows %+v, want row %d alone", parked, p.Bad)
		}
		if r := parked[0]; r.Attempts != 3 || !strings.Contains(r.LastError, "MESSAGE_TOO_LARGE") || r.Waiting != waiting {
			return fmt.Errorf("parked row %+v: want 3 attempts, MESSAGE_TOO_LARGE, %d rows waiting", r, waiting)
		}
		return nil
	})
	// Seq 1 went; the rows after the parked one did not.
	check.Poll(time.Second)
	if got := check.Seq(p.Key); got != 1 {
		t.Fatalf("key %s reached seq %d in Kafka while its seq 2 is parked; want 1", p.Key, got)
	}
	if n := Count(t, pool, "select count(*) from outbox where partition_key = $1 and published_at is null", p.Key); n != waiting+1 {
		t.Fatalf("%d rows of the parked key pending, want %d", n, waiting+1)
	}

	if err := outbox.Skip(ctx, pool, p.Bad, "too large for the topic; re-emitted by hand"); err != nil {
		t.Fatal(err)
	}
	check.Skipped(p.Key, 2)
	check.WaitAll([]string{p.Key}, p.Seqs, 30*time.Second)
	if errs := check.Errors(); len(errs) > 0 {
		t.Fatal(errs)
	}
}
