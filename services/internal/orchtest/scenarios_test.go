package orchtest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/orchestrator/orchestratorstore"
)

// once is the sends of each key when every command went out once.
func once(keys ...string) map[string]int {
	m := map[string]int{}
	for _, k := range keys {
		m[k] = 1
	}
	return m
}

// One deployment, every reply sent twice, many sagas side by side: the
// happy path, a refusal at each step, a compensation that fails twice and
// then succeeds, one that never succeeds, and bad replies injected while a
// saga waits. Each saga must end as its script says, with exactly the
// commands it needed, each sent once.
func TestSagaScenariosWithDuplicatedRepliesOnASharedDeployment(t *testing.T) {
	d := newDeployment(t, opts{compensationAttempts: 4, webhookStatus: 200})
	d.fakes.dupReply = true

	happy := d.checkout(nil)
	failAt := map[string]string{}
	for _, typ := range []contract.Type{contract.TypePaymentAuthorizeHold, contract.TypeInventoryReserveStock,
		contract.TypeShippingCreateShipment, contract.TypePaymentCaptureHold} {
		failAt[string(typ)] = d.checkout(plan{typ: {refuse}})
	}
	flaky := d.checkout(plan{contract.TypeShippingCreateShipment: {refuse}, contract.TypePaymentCancelHold: {refuse, refuse}})
	never := d.checkout(plan{contract.TypeInventoryReserveStock: {refuse},
		contract.TypePaymentCancelHold: {refuse, refuse, refuse, refuse, refuse}})
	held := d.checkout(plan{contract.TypeInventoryReserveStock: {hold}})

	// While held waits for its stock reply: bad and early replies.
	testkit.Eventually(t, 30*time.Second, "reserve_inventory of the held saga received", func() error {
		if d.fakes.heldCount() == 0 {
			return fmt.Errorf("nothing held yet")
		}
		return nil
	})
	reply := func(sagaID, step string, typ contract.Type, key string) contract.SagaStepRepliedV1 {
		return contract.SagaStepRepliedV1{SagaID: sagaID, Step: step, CommandType: contract.SagaStepRepliedV1CommandType(typ),
			CommandID: schemas.NewEventID(), IdempotencyKey: key, Outcome: contract.SagaStepRepliedV1OutcomeSucceeded}
	}
	d.produce(reply(held, "capture_payment", contract.TypePaymentCaptureHold, held+":capture_payment"))               // a step not started
	d.produce(reply(held, "reserve_credit", contract.TypePaymentCancelHold, held+":reserve_credit_compensate"))       // a compensation never sent
	d.produce(reply(schemas.NewEventID(), "reserve_credit", contract.TypePaymentAuthorizeHold, "x:reserve_credit"))   // unknown saga
	d.produce(reply(held, "teleport", contract.TypePaymentAuthorizeHold, held+":teleport"))                           // unknown step
	d.produce(reply(held, "reserve_inventory", contract.TypeInventoryReserveStock, "someone-else:reserve_inventory")) // foreign key
	v2 := strings.Replace(string(mustEnvelope(t, d, reply(held, "reserve_inventory", contract.TypeInventoryReserveStock, held+":reserve_inventory"))),
		`"event_version":1`, `"event_version":2`, 1)
	d.produceRaw(d.prefix+"saga-replies", held, []byte(v2)) // a version the catalog does not know
	d.produceRaw(d.prefix+"saga-replies", held, []byte("{not json"))

	testkit.Eventually(t, 30*time.Second, "bad replies counted", func() error {
		if n := testkit.Count(t, d.pool, `select count(*) from dead_letters`); n != 2 {
			return fmt.Errorf("%d dead letters, want 2", n)
		}
		if n := testkit.Count(t, d.pool, `select count(*) from saga_rejected_inputs`); n != 3 {
			return fmt.Errorf("%d rejected inputs, want 3", n)
		}
		if n := d.metric("concord_saga_inputs_absorbed_total", `reason="out_of_order"`); n != 2 {
			var lines []string
			for _, l := range strings.Split(d.procs[0].Log(), "\n") {
				if strings.Contains(l, "out_of_order") {
					lines = append(lines, l)
				}
			}
			return fmt.Errorf("out_of_order absorbed %v, want 2:\n%s", n, strings.Join(lines, "\n"))
		}
		return nil
	})
	if got := testkit.Strings(t, d.pool, `select reason from dead_letters order by reason`); !slices.Equal(got, []string{"decode", "unknown_version"}) {
		t.Errorf("dead letters %v", got)
	}
	if got := testkit.Strings(t, d.pool, `select reason from saga_rejected_inputs order by reason`); !slices.Equal(got,
		[]string{"command_mismatch", "unknown_saga", "unknown_step"}) {
		t.Errorf("rejected inputs %v", got)
	}
	for reason, want := range map[string]float64{orchestratorstore.RejectUnknownSaga: 1, orchestratorstore.RejectUnknownStep: 1,
		orchestratorstore.RejectCommandMismatch: 1} {
		if got := d.metric("concord_saga_inputs_rejected_total", `reason="`+reason+`"`); got != want {
			t.Errorf("rejected %s = %v, want %v", reason, got, want)
		}
	}
	// Held this long, the saga counts as stuck.
	testkit.Eventually(t, 15*time.Second, "held saga reported stuck", func() error {
		if d.metric("concord_saga_stuck") < 1 || !strings.Contains(d.procs[0].Log(), "saga stuck") {
			return fmt.Errorf("not reported stuck yet")
		}
		return nil
	})
	if d.status(held) != "RUNNING" {
		t.Fatalf("held saga is %s after bad replies", d.status(held))
	}
	d.fakes.release(context.Background())

	all := append([]string{happy, flaky, never, held}, slices.Collect(maps.Values(failAt))...)
	st := d.waitTerminal(60*time.Second, all...)

	check := func(name, id, status string, sent map[string]int, steps ...string) {
		t.Helper()
		if st[id] != status {
			t.Errorf("%s: status %s, want %s", name, st[id], status)
		}
		if got := d.sent(id); !maps.Equal(got, sent) {
			t.Errorf("%s: commands sent %v, want %v", name, got, sent)
		}
		if got := d.steps(id); !slices.Equal(got, steps) {
			t.Errorf("%s: steps %v, want %v", name, got, steps)
		}
	}
	all4 := []string{"reserve_credit", "reserve_inventory", "create_shipment", "capture_payment"}
	check("happy", happy, "COMPLETED", once(all4...),
		"reserve_credit=executed", "reserve_inventory=executed", "create_shipment=executed", "capture_payment=executed")
	check("held", held, "COMPLETED", once(all4...),
		"reserve_credit=executed", "reserve_inventory=executed", "create_shipment=executed", "capture_payment=executed")
	check("fail at reserve_credit", failAt["payment.authorize_hold"], "COMPENSATED", once("reserve_credit"), "reserve_credit=failed")
	check("fail at reserve_inventory", failAt["inventory.reserve_stock"], "COMPENSATED",
		once("reserve_credit", "reserve_inventory", "reserve_credit_compensate"),
		"reserve_credit=compensated", "reserve_inventory=failed")
	check("fail at create_shipment", failAt["shipping.create_shipment"], "COMPENSATED",
		once("reserve_credit", "reserve_inventory", "create_shipment", "reserve_inventory_compensate", "reserve_credit_compensate"),
		"reserve_credit=compensated", "reserve_inventory=compensated", "create_shipment=failed")
	check("fail at capture_payment", failAt["payment.capture_hold"], "COMPENSATED",
		once(append(all4, "create_shipment_compensate", "reserve_inventory_compensate", "reserve_credit_compensate")...),
		"reserve_credit=compensated", "reserve_inventory=compensated", "create_shipment=compensated", "capture_payment=failed")
	// Reverse order: each compensation was sent only after the later
	// step's was done.
	order := testkit.Strings(t, d.pool, `select step_name from saga_steps s where s.saga_id = $1 and compensated_at is not null
		order by compensated_at`, failAt["payment.capture_hold"])
	if !slices.Equal(order, []string{"create_shipment", "reserve_inventory", "reserve_credit"}) {
		t.Errorf("compensation order %v", order)
	}

	flakySent := once("reserve_credit", "reserve_inventory", "create_shipment", "reserve_inventory_compensate")
	flakySent["reserve_credit_compensate"] = 3
	check("compensation fails twice", flaky, "COMPENSATED", flakySent,
		"reserve_credit=compensated", "reserve_inventory=compensated", "create_shipment=failed")

	neverSent := once("reserve_credit", "reserve_inventory")
	neverSent["reserve_credit_compensate"] = 4
	check("compensation never succeeds", never, "FAILED", neverSent, "reserve_credit=compensation_failed", "reserve_inventory=failed")
	if got := d.metric("concord_saga_failed_total", `saga="checkout"`); got != 1 {
		t.Errorf("concord_saga_failed_total = %v, want 1", got)
	}
	reviews := testkit.Strings(t, d.pool, `select saga_id || ' ' || array_to_string(failed_steps, ',') from saga_reviews where resolved_at is null`)
	if !slices.Equal(reviews, []string{never + " reserve_credit"}) {
		t.Fatalf("open reviews %v", reviews)
	}
	testkit.Eventually(t, 15*time.Second, "alert webhook called", func() error {
		for _, b := range d.alerts.received() {
			if strings.Contains(b, never) && strings.Contains(b, "saga_failed") {
				return nil
			}
		}
		return fmt.Errorf("webhook got %v", d.alerts.received())
	})
	if !strings.Contains(d.procs[0].Log(), "ALERT saga FAILED") {
		t.Error("no alert log line")
	}
	// The operator resolves the entry with the CLI verb; a second time is refused.
	var id int64
	if err := d.pool.QueryRow(context.Background(), `select id from saga_reviews where saga_id = $1`, never).Scan(&id); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (string, error) {
		c := exec.Command(filepath.Join(binDir, "orchestrator"), append([]string{"reviews"}, args...)...)
		c.Env = append(c.Environ(), "ORCHESTRATOR_DATABASE_URL="+d.dbURL)
		out, err := c.CombinedOutput()
		return string(out), err
	}
	if out, err := cli("list"); err != nil || !strings.Contains(out, never) {
		t.Fatalf("reviews list: %v\n%s", err, out)
	}
	if out, err := cli("resolve", fmt.Sprint(id), "--by", "alice", "--note", "released the hold by hand"); err != nil {
		t.Fatalf("reviews resolve: %v\n%s", err, out)
	}
	if out, err := cli("resolve", fmt.Sprint(id), "--by", "bob", "--note", "again"); err == nil || !strings.Contains(out, "already resolved") {
		t.Fatalf("second resolve: %v\n%s", err, out)
	}
	if out, err := cli("list"); err != nil || strings.Contains(out, never) {
		t.Fatalf("resolved entry still listed as open: %v\n%s", err, out)
	}

	// Every reply arrived twice: the second copies were absorbed.
	if n := d.metric("concord_saga_inputs_absorbed_total", `reason="duplicate"`); n < float64(len(all)) {
		t.Errorf("duplicates absorbed %v, want at least %d", n, len(all))
	}
	// Each saga told its outcome once.
	finished := d.finished(len(all))
	for _, id := range all {
		if finished[id] != st[id] {
			t.Errorf("saga %s: saga.finished %q, status %s", id, finished[id], st[id])
		}
	}

	// Seed 001's dashboard queries run as written.
	for _, q := range orchestratorstore.DashboardQueries {
		rows, err := d.pool.Query(context.Background(), q.SQL)
		if err != nil {
			t.Fatalf("%s: %v", q.Title, err)
		}
		n := 0
		for rows.Next() {
			n++
		}
		if rows.Err() != nil || n == 0 {
			t.Errorf("%s: %d rows, err %v", q.Title, n, rows.Err())
		}
	}
	var failedDetails string
	if err := d.pool.QueryRow(context.Background(), `select step_details::text from (`+strings.TrimSuffix(orchestratorstore.DashboardQueries[1].SQL, ";")+`) q
		where saga_id = $1`, never).Scan(&failedDetails); err != nil || !strings.Contains(failedDetails, "compensation_failed") {
		t.Errorf("failed-saga query: %v %s", err, failedDetails)
	}
}

// finished reads saga-events until n sagas told their outcome and
// returns each saga's status; a saga told twice fails the test.
func (d *deployment) finished(n int) map[string]string {
	d.t.Helper()
	cl := d.producerClient(d.prefix + "saga-events")
	out := map[string]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(out) < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			env, err := schemas.DecodeEnvelope(r.Value)
			if err != nil {
				d.t.Fatal(err)
			}
			var f contract.SagaFinishedV1
			if err := json.Unmarshal(env.Data, &f); err != nil {
				d.t.Fatal(err)
			}
			if _, dup := out[f.SagaID]; dup {
				d.t.Errorf("saga %s finished twice", f.SagaID)
			}
			out[f.SagaID] = string(f.Status)
		})
	}
	return out
}

func (d *deployment) producerClient(topic string) *kgo.Client {
	d.t.Helper()
	return d.kafka.Client(d.t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
}

func mustEnvelope(t *testing.T, d *deployment, p contract.Payload) []byte {
	t.Helper()
	_, rec, err := d.writer.Prepare(outboxEvent(p))
	if err != nil {
		t.Fatal(err)
	}
	return rec.Payload
}
