package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
)

type fixture struct {
	k      *testkit.Kafka
	pool   *pgxpool.Pool
	dbURL  string
	topic  string
	group  string
	runs   atomic.Int64 // handler invocations that committed or not
	broken atomic.Bool  // the handler rejects poison-marked events permanently
}

func newFixture(t *testing.T, partitions int32) *fixture {
	f := &fixture{k: testkit.NewKafka(t)}
	f.dbURL = testkit.NewDatabase(t, testkit.PostgresURL(t))
	f.pool = testkit.Pool(t, f.dbURL)
	if err := idempotent.Migrate(context.Background(), f.pool); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(context.Background(), `CREATE TABLE effects (id bigint GENERATED ALWAYS AS IDENTITY, event_id text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	f.topic = f.k.CreateTopic(t, "orders", partitions)
	f.group = testkit.UniqueName(t, "g")
	return f
}

func (f *fixture) handler(ctx context.Context, tx pgx.Tx, ev idempotent.Event, _ outbox.Emitter) error {
	var d struct {
		Bad bool `json:"bad"`
	}
	_ = json.Unmarshal(ev.Data, &d)
	if d.Bad && f.broken.Load() {
		return idempotent.Permanent(fmt.Errorf("cannot handle event %s yet", ev.EventID))
	}
	_, err := tx.Exec(ctx, `INSERT INTO effects (event_id) VALUES ($1)`, ev.EventID)
	return err
}

func (f *fixture) produce(t *testing.T, n int, bad bool) {
	t.Helper()
	cl := f.k.Client(t)
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("k%d", i)
		data, _ := json.Marshal(map[string]any{"order_id": schemas.NewEventID(), "customer_id": "c", "currency": "EUR",
			"total_amount": 1, "items": []map[string]any{{"sku": "S", "quantity": 1, "unit_price": 1}}, "bad": bad})
		v, err := schemas.Envelope{EventID: schemas.NewEventID(), EventType: "order.created", EventVersion: 2, Timestamp: time.Now(),
			AggregateType: "order", AggregateID: key, CorrelationID: key, Data: data}.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: f.topic, Key: []byte(key), Value: v})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// consume runs a consumer until every record up to the topic's end is
// committed and returns its stats.
func (f *fixture) consume(t *testing.T) idempotent.Stats {
	t.Helper()
	r, stop := f.start(t)
	f.waitCommitted(t)
	stop()
	return r.Stats()
}

func (f *fixture) start(t *testing.T) (*idempotent.Runner, func()) {
	t.Helper()
	r, err := idempotent.NewRunner(idempotent.Config{Group: f.group, Topics: []string{f.topic}, Pool: f.pool,
		Kafka: f.k.Config(), Handler: f.handler, CommitInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(stop)
	return r, stop
}

func (f *fixture) waitCommitted(t *testing.T) {
	t.Helper()
	adm := f.k.Admin(t)
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ends, err1 := adm.ListEndOffsets(ctx, f.topic)
		offs, err2 := adm.FetchOffsets(ctx, f.group)
		cancel()
		done := err1 == nil && err2 == nil
		if done {
			ends.Each(func(e kadmListed) {
				if o, ok := offs.Lookup(e.Topic, e.Partition); e.Offset > 0 && (!ok || o.At != e.Offset) {
					done = false
				}
			})
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s did not commit to the end of %s", f.group, f.topic)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (f *fixture) effects(t *testing.T) (total, distinct int) {
	t.Helper()
	if err := f.pool.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT event_id) FROM effects`).Scan(&total, &distinct); err != nil {
		t.Fatal(err)
	}
	return total, distinct
}

func (f *fixture) replay(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	args = append([]string{"--kafka-brokers", strings.Join(f.k.Brokers, ",")}, args...)
	if len(args) > 2 && args[2] == "dlq" { // sub-command first
		args = append([]string{"dlq", "--kafka-brokers", strings.Join(f.k.Brokers, ",")}, args[3:]...)
	}
	err := run(context.Background(), args, &out, &errOut)
	return out.String() + errOut.String(), err
}

func TestReplayToEarliestSkipsAppliedEventsAndReprocessRunsEachHandlerOnce(t *testing.T) {
	f := newFixture(t, 3)
	const n = 30
	f.produce(t, n, false)
	if s := f.consume(t); s.Applied != n {
		t.Fatalf("first run applied %d", s.Applied)
	}

	out, err := f.replay(t, "--group", f.group, "--topic", f.topic, "--to-earliest")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Dry run") || !strings.Contains(out, "CURRENT-OFFSET") {
		t.Fatalf("dry run output:\n%s", out)
	}
	f.waitCommitted(t) // the dry run changed nothing

	if out, err = f.replay(t, "--group", f.group, "--topic", f.topic, "--to-earliest", "--execute"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s := f.consume(t)
	if total, _ := f.effects(t); total != n || s.Applied != 0 || s.Duplicates != n {
		t.Fatalf("replay without reprocess: %d effects (want %d), stats %+v (want 0 applied, %d duplicates)", total, n, s, n)
	}

	out, err = f.replay(t, "--group", f.group, "--all-topics", "--to-earliest", "--reprocess", "--database-url", f.dbURL, "--execute")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, fmt.Sprintf("Deleted %d processed_events rows", n)) {
		t.Fatalf("reprocess output:\n%s", out)
	}
	s = f.consume(t)
	total, distinct := f.effects(t)
	if s.Applied != n || total != 2*n || distinct != n {
		t.Fatalf("reprocess: stats %+v, %d effects of %d events; want each handler run once more (%d applied, %d effects)", s, total, distinct, n, 2*n)
	}
}

func TestReplayRefusesGroupWithLiveMembers(t *testing.T) {
	f := newFixture(t, 2)
	f.produce(t, 10, false)
	_, stop := f.start(t)
	defer stop()
	f.waitCommitted(t)
	before := committed(t, f)

	out, err := f.replay(t, "--group", f.group, "--topic", f.topic, "--to-earliest", "--execute")
	if err == nil {
		t.Fatalf("replay of a live group succeeded:\n%s", out)
	}
	want := fmt.Sprintf("Assignments can only be reset if the group '%s' is inactive, but the current state is Stable.", f.group)
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
	if after := committed(t, f); after != before {
		t.Fatalf("offsets changed: %s -> %s", before, after)
	}
}

// TestReplayRefusesLiveConsumerProtocolGroup holds a KIP-848 group live:
// the classic DescribeGroups call answers GROUP_ID_NOT_FOUND for it, so a
// tool that asks only that call takes the group for dead and resets it
// under its members.
func TestReplayRefusesLiveConsumerProtocolGroup(t *testing.T) {
	f := newFixture(t, 2)
	f.produce(t, 10, false)
	cl := f.k.Client(t, kgo.ConsumerGroup(f.group), kgo.ConsumeTopics(f.topic), kgo.ServerSideBalancer(),
		kgo.Balancers(kgo.RangeBalancer()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitInterval(100*time.Millisecond))
	stop := make(chan struct{})
	polled := make(chan struct{})
	t.Cleanup(func() { close(stop); <-polled })
	go func() {
		defer close(polled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			cl.PollFetches(ctx)
			cancel()
		}
	}()
	adm := f.k.Admin(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		d, err := adm.DescribeConsumerGroups(ctx, f.group)
		cancel()
		if err == nil && strings.EqualFold(d[f.group].State, "stable") && len(d[f.group].Members) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the consumer-protocol group did not become stable: %v %+v", err, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
	f.waitCommitted(t)
	before := committed(t, f)

	out, err := f.replay(t, "--group", f.group, "--topic", f.topic, "--to-earliest", "--execute")
	if err == nil {
		t.Fatalf("replay of a live consumer-protocol group succeeded:\n%s", out)
	}
	want := fmt.Sprintf("Assignments can only be reset if the group '%s' is inactive, but the current state is Stable.", f.group)
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
	if after := committed(t, f); after != before {
		t.Fatalf("offsets changed: %s -> %s", before, after)
	}
}

func committed(t *testing.T, f *fixture) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	offs, err := f.k.Admin(t).FetchOffsets(ctx, f.group)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	offs.Each(func(o kadmOffsetResponse) { parts = append(parts, fmt.Sprintf("%d:%d", o.Partition, o.At)) })
	return strings.Join(sortStrings(parts), ",")
}

func TestReplayDLQAppliesAFixedRecordOnce(t *testing.T) {
	f := newFixture(t, 1)
	f.broken.Store(true)
	f.produce(t, 1, true)
	f.produce(t, 2, false)
	_, stop := f.start(t)
	defer stop()
	f.waitCommitted(t)
	if total, _ := f.effects(t); total != 2 {
		t.Fatalf("%d effects before the fix, want 2", total)
	}

	out, err := f.replay(t, "dlq", "--group", f.group, "--database-url", f.dbURL)
	if err != nil || !strings.Contains(out, "handler") || !strings.Contains(out, "Dry run") {
		t.Fatalf("dlq dry run: %v\n%s", err, out)
	}
	f.broken.Store(false) // the fix is deployed
	if out, err = f.replay(t, "dlq", "--group", f.group, "--database-url", f.dbURL, "--execute"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	f.waitCommitted(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if total, distinct := f.effects(t); total == 3 && distinct == 3 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("%d effects of %d events after the DLQ replay, want 3 of 3", total, distinct)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Nothing left to replay; a second replay re-publishes nothing.
	if out, err = f.replay(t, "dlq", "--group", f.group, "--database-url", f.dbURL, "--execute"); err != nil || !strings.Contains(out, "No pending") {
		t.Fatalf("second dlq replay: %v\n%s", err, out)
	}
}

// TestReplayTopicSelectionDoesNotDependOnOrder: the partitions selected by
// several --topic arguments are the same in any order; a partition selected
// twice is refused either way, as Apache's tool refuses it.
func TestReplayTopicSelectionDoesNotDependOnOrder(t *testing.T) {
	f := newFixture(t, 3)
	T := f.topic
	partitions := func(out string) string {
		var ps []string
		for _, line := range strings.Split(out, "\n") {
			if fields := strings.Fields(line); len(fields) == 5 && fields[1] == T {
				ps = append(ps, fields[2])
			}
		}
		return strings.Join(sortStrings(ps), ",")
	}
	for _, tc := range []struct {
		args []string
		want string // the selected partitions; "" when refused
	}{
		{[]string{T, T + ":1"}, ""},
		{[]string{T + ":1", T}, ""},
		{[]string{T + ":1,1"}, ""},
		{[]string{T, T}, "0,1,2"},
		{[]string{T + ":2", T + ":0"}, "0,2"},
		{[]string{T + ":0", T + ":2"}, "0,2"},
	} {
		args := []string{"--group", f.group, "--to-earliest"}
		for _, a := range tc.args {
			args = append(args, "--topic", a)
		}
		out, err := f.replay(t, args...)
		if tc.want == "" {
			if err == nil || !strings.Contains(err.Error(), "partition "+T+"-1 is selected twice") {
				t.Errorf("--topic %v: err = %v, want a refusal naming %s-1\n%s", tc.args, err, T, out)
			}
			continue
		}
		if err != nil {
			t.Errorf("--topic %v: %v\n%s", tc.args, err, out)
			continue
		}
		if got := partitions(out); got != tc.want {
			t.Errorf("--topic %v selected partitions %q, want %q\n%s", tc.args, got, tc.want, out)
		}
	}
}
