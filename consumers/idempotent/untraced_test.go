package idempotent_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
)

// untracedProcess marks the process TestUntracedBatchesCarryEachEventsTrace
// runs its scenario in.
const untracedProcess = "CONCORD_IDEMPOTENT_UNTRACED_PROCESS"

// With no tracer provider exporting, the runner starts no span, yet the
// trace each record came with still reaches EventContext and the events
// the handler emits in its name: in a batch of several events and in a
// batch of one. The scenario runs in a process of its own (this test
// binary, asked for this test alone), because a provider another test
// installs (testkit.Spans) stays for the life of the process.
func TestUntracedBatchesCarryEachEventsTrace(t *testing.T) {
	if os.Getenv(untracedProcess) == "" {
		cmd := exec.Command(os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.count", "1", "-test.v")
		cmd.Env = append(os.Environ(), untracedProcess+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
			t.Fatalf("the untraced process: %v\n%s", err, out)
		}
		return
	}
	if kit.Tracing() {
		t.Fatal("a tracer provider exports in the untraced process")
	}
	k := testkit.NewKafka(t)
	pool := testkit.NewPool(t)
	migrateWithOutbox(t, pool)
	topic := k.CreateTopic(t, "untraced", 1)
	cl := k.Client(t)
	traceOf := map[string]string{} // event id → the traceparent its record carries
	traced := func(seq int) *kgo.Record {
		id, v := event(t, "k", seq)
		tp := fmt.Sprintf("00-%032x-%016x-01", seq+1, seq+1)
		traceOf[id] = tp
		rec := record(topic, "k", id, v)
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: schemas.HeaderTraceparent, Value: []byte(tp)})
		return rec
	}

	var mu sync.Mutex
	seen := map[string]string{} // event id → the traceparent of EventContext
	most := 0                   // the most events in one call
	handler := func(ctx context.Context, tx pgx.Tx, evs []idempotent.Event, out outbox.Emitter) error {
		mu.Lock()
		most = max(most, len(evs))
		for _, ev := range evs {
			seen[ev.EventID] = kit.Traceparent(idempotent.EventContext(ctx, ev))
		}
		mu.Unlock()
		for _, ev := range evs {
			d, err := contract.Decode[contract.OrderCreatedV2](ev.Envelope)
			if err != nil {
				return idempotent.Permanent(err)
			}
			if _, err := out.Emit(outbox.CausedBy(ev.Envelope, contract.OrderConfirmedV1{OrderID: d.OrderID, Currency: d.Currency, TotalAmount: &d.TotalAmount})); err != nil {
				return err
			}
		}
		return nil
	}
	// Three records waiting before the runner starts come in one batch;
	// the fourth, produced once they are applied, alone.
	produce(t, cl, traced(0), traced(1), traced(2))
	start(t, idempotent.Config{Group: testkit.UniqueName(t, "g"), Topics: []string{topic}, Pool: pool, Kafka: kafkaConfig(k),
		BatchHandler: handler, Outbox: outbox.Writer{TopicPrefix: "u."}})
	eventually(t, 60*time.Second, "three events emitted", countIs(t, pool, 3, `SELECT count(*) FROM outbox`))
	produce(t, cl, traced(3))
	eventually(t, 60*time.Second, "the fourth emitted", countIs(t, pool, 4, `SELECT count(*) FROM outbox`))

	mu.Lock()
	defer mu.Unlock()
	if most < 2 {
		t.Fatalf("no handler call held more than one event (at most %d): the batch path is not tested", most)
	}
	for id, want := range traceOf {
		if seen[id] != want {
			t.Errorf("EventContext of event %s has traceparent %q, want its record's %q", id, seen[id], want)
		}
	}
	rows, err := pool.Query(context.Background(), `SELECT payload, coalesce(headers->>$1, '') FROM outbox`, schemas.HeaderTraceparent)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Payload     []byte
		Traceparent string
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range got {
		env, err := schemas.DecodeEnvelope(r.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if want := traceOf[env.CausationID]; r.Traceparent != want {
			t.Errorf("the event caused by %s has traceparent %q, want its cause's %q", env.CausationID, r.Traceparent, want)
		}
	}
}
