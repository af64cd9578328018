package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/infra/testkit/proc"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/relay/publisher"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/shipping/carriersim"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "shipping-svc-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "shipping-svc")
	if err := proc.GoBuild(".", binary, "."); err != nil {
		fmt.Fprintln(os.Stderr, "build shipping-svc:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// deployment is one shipping-svc process on a fresh database and topic
// prefix, against an in-process carrier-sim.
type deployment struct {
	t      *testing.T
	sim    *carriersim.Server
	svc    *proc.Process
	pool   *pgxpool.Pool
	kafka  *kgo.Client
	k      *testkit.Kafka
	prefix string
	url    string
}

func newDeployment(t *testing.T, extraEnv ...string) *deployment {
	t.Helper()
	sim, err := carriersim.New(carriersim.Config{Seed: 3, Faults: carriersim.DefaultFaults(), APIKey: "ck_test"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(sim)
	t.Cleanup(func() { sim.Drain(); hs.Close() })
	db := testkit.NewDatabase(t, testkit.PostgresURL(t))
	k := testkit.NewKafka(t)
	prefix := testkit.UniqueName(t, "ship") + "."
	ports, err := kit.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	d := &deployment{t: t, sim: sim, k: k, prefix: prefix, url: fmt.Sprintf("http://127.0.0.1:%d", ports[0])}
	env := append([]string{"SHIPPING_DATABASE_URL=" + db, "CARRIER_URL=" + hs.URL, "CARRIER_API_KEY=ck_test",
		// A lost answer is given up after 1s, and the lease (2s) lets the
		// next attempt take a shipment a killed process held.
		"CARRIER_TIMEOUT=1s", "CARRIER_LEASE=2s", "CARRIER_MAX_BACKOFF=300ms", "STEP_BUDGET=20s",
		"CONCORD_TOPIC_PREFIX=" + prefix, "CONSUMER_GROUP=" + prefix + "shipping-svc", "KAFKA_BROKERS=" + strings.Join(k.Brokers, ","),
		"CONCORD_OPS_ADDR=127.0.0.1:" + fmt.Sprint(ports[0]), "TOPIC_PARTITIONS=3", "SHUTDOWN_GRACE=5s", "GROUP_SESSION_TIMEOUT=6s"}, extraEnv...)
	// The orchestrator owns saga-replies and creates it; here the test
	// stands in for it.
	adm := k.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := publisher.CreateTopics(ctx, adm, 3, -1, prefix+contract.TypeSagaStepReplied.Topic()); err != nil {
		t.Fatal(err)
	}
	d.svc = proc.Start(t, proc.Command{Name: "shipping-svc", Path: binary, Env: env, Log: filepath.Join(t.TempDir(), "shipping-svc.log")})
	d.waitReady()
	t.Cleanup(func() { _ = d.svc.Stop(syscall.SIGTERM, 10*time.Second) })
	d.pool = testkit.Pool(t, db)
	d.kafka = k.Client(t)
	return d
}

// consumer reads topic from the start.
func (d *deployment) consumer(t *testing.T, topic string) *kgo.Client {
	t.Helper()
	return d.k.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
}

func (d *deployment) waitReady() {
	d.t.Helper()
	if err := d.svc.WaitReady(context.Background(), d.url+"/readyz", 60*time.Second); err != nil {
		d.t.Fatal(err)
	}
}

// send produces a command as the orchestrator's relay would, and returns
// its event id.
func (d *deployment) send(t *testing.T, p contract.Payload) string {
	t.Helper()
	_, rec, err := outbox.Writer{TopicPrefix: d.prefix}.Prepare(outbox.Event{Payload: p})
	if err != nil {
		t.Fatal(err)
	}
	r := &kgo.Record{Topic: rec.Topic, Key: []byte(rec.PartitionKey), Value: rec.Payload, Headers: []kgo.RecordHeader{
		{Key: schemas.HeaderEventID, Value: []byte(rec.EventID)},
		{Key: schemas.HeaderEventType, Value: []byte(rec.EventType)},
		{Key: schemas.HeaderEventVersion, Value: []byte(fmt.Sprint(rec.EventVersion))},
		{Key: schemas.HeaderContentType, Value: []byte(schemas.ContentTypeJSON)},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := d.kafka.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return rec.EventID
}

// replies reads the saga's replies from the service's outbox, in order.
func (d *deployment) replies(t *testing.T, sagaID string) []contract.SagaStepRepliedV1 {
	t.Helper()
	rows, err := d.pool.Query(context.Background(), `select payload from outbox where event_type = 'saga.step_replied' and partition_key = $1 order by id`, sagaID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []contract.SagaStepRepliedV1
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		env, err := schemas.DecodeEnvelope(b)
		if err != nil {
			t.Fatal(err)
		}
		var r contract.SagaStepRepliedV1
		if err := json.Unmarshal(env.Data, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitReplies polls until the saga has n replies and returns them.
func (d *deployment) waitReplies(t *testing.T, sagaID string, n int) []contract.SagaStepRepliedV1 {
	t.Helper()
	var got []contract.SagaStepRepliedV1
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("%d replies of saga %s", n, sagaID), func() error {
		if got = d.replies(t, sagaID); len(got) < n {
			return fmt.Errorf("%d replies", len(got))
		}
		return nil
	})
	if len(got) != n {
		t.Fatalf("saga %s: %d replies, want %d: %+v", sagaID, len(got), n, got)
	}
	return got
}

func createCmd(sagaID, postal string) contract.ShippingCreateShipmentV1 {
	return contract.ShippingCreateShipmentV1{SagaID: sagaID, Step: "create_shipment", IdempotencyKey: sagaID + ":create_shipment", Attempt: 1,
		OrderID: sagaID, Items: []contract.ShippingCreateShipmentV1Item{{SKU: "SKU-1", Quantity: 2}},
		Address: contract.ShippingCreateShipmentV1Address{Line1: "1 Main St", City: "Berlin", PostalCode: postal, Country: "DE"}}
}

func cancelCmd(sagaID string) contract.ShippingCancelShipmentV1 {
	key := sagaID + ":create_shipment"
	return contract.ShippingCancelShipmentV1{SagaID: sagaID, Step: "create_shipment", IdempotencyKey: key + "_compensate", Attempt: 1,
		OrderID: sagaID, ShipmentKey: key}
}

// shipmentsOf returns the carrier's shipments of a key.
func (d *deployment) shipmentsOf(key string) []carriersim.Shipment {
	var out []carriersim.Shipment
	for _, s := range d.sim.Shipments() {
		if s.IdempotencyKey == key {
			out = append(out, s)
		}
	}
	return out
}

func (d *deployment) setFaults(t *testing.T, knobs map[string]string) {
	t.Helper()
	if _, err := d.sim.SetFaults(knobs); err != nil {
		t.Fatal(err)
	}
}

func wantReply(t *testing.T, r contract.SagaStepRepliedV1, cmdType contract.SagaStepRepliedV1CommandType, cmdID string, outcome contract.SagaStepRepliedV1Outcome, reason string) {
	t.Helper()
	if r.CommandType != cmdType || r.CommandID != cmdID || r.Outcome != outcome || r.Reason != reason {
		t.Fatalf("reply %+v, want %s to %s %s (%q)", r, outcome, cmdType, cmdID, reason)
	}
}

// The subtests share one deployment and run one after the other: the
// carrier's "next N" fault counters see every request.
func TestShippingCommandsOnTheRealStack(t *testing.T) {
	d := newDeployment(t)

	t.Run("CreateThenCancelReplySucceededAndVoidTheShipment", func(t *testing.T) {
		saga := testkit.UniqueName(t, "s")
		id := d.send(t, createCmd(saga, "10115"))
		r := d.waitReplies(t, saga, 1)[0]
		wantReply(t, r, contract.SagaStepRepliedV1CommandTypeShippingCreateShipment, id, contract.SagaStepRepliedV1OutcomeSucceeded, "")
		sh := d.shipmentsOf(saga + ":create_shipment")
		if len(sh) != 1 || r.ShipmentID != sh[0].ID || r.TrackingNumber != sh[0].TrackingNumber || r.IdempotencyKey != saga+":create_shipment" {
			t.Fatalf("reply %+v, carrier %+v", r, sh)
		}
		cid := d.send(t, cancelCmd(saga))
		c := d.waitReplies(t, saga, 2)[1]
		wantReply(t, c, contract.SagaStepRepliedV1CommandTypeShippingCancelShipment, cid, contract.SagaStepRepliedV1OutcomeSucceeded, "")
		if c.IdempotencyKey != saga+":create_shipment_compensate" || c.ShipmentID != sh[0].ID {
			t.Fatalf("cancel reply %+v", c)
		}
		if got := d.shipmentsOf(saga + ":create_shipment")[0].Status; got != carriersim.StatusCancelled {
			t.Fatalf("carrier status %s after the cancel", got)
		}
		// The in-process relay publishes both replies, keyed by the saga.
		cl := d.consumer(t, d.prefix+contract.TypeSagaStepReplied.Topic())
		seen := map[string]bool{}
		testkit.Eventually(t, 30*time.Second, "both replies on saga-replies", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			cl.PollFetches(ctx).EachRecord(func(rec *kgo.Record) {
				if string(rec.Key) == saga {
					env, err := schemas.DecodeEnvelope(rec.Value)
					if err == nil && env.EventType == string(contract.TypeSagaStepReplied) {
						seen[env.CausationID] = true
					}
				}
			})
			if !seen[id] || !seen[cid] {
				return fmt.Errorf("replies to %v seen", seen)
			}
			return nil
		})
		res, err := http.Get(d.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		for _, m := range []string{`concord_shipping_carrier_calls_total{kind="create",outcome="ok"}`, `concord_shipping_carrier_calls_total{kind="cancel",outcome="ok"}`} {
			if !strings.Contains(string(body), m) {
				t.Errorf("/metrics lacks %s", m)
			}
		}
	})

	t.Run("DuplicateCommandsMakeOneShipmentAndGetTheSameReply", func(t *testing.T) {
		saga := testkit.UniqueName(t, "s")
		// The carrier takes 800ms to answer (the client waits 1s): the resend is applied while
		// the first is in flight, and the two are answered once.
		d.setFaults(t, map[string]string{"latency": "800ms"})
		first := d.send(t, createCmd(saga, "10115"))
		second := d.send(t, createCmd(saga, "10115"))
		testkit.Eventually(t, 30*time.Second, "both commands applied", func() error {
			if n := testkit.Count(t, d.pool, `select count(*) from processed_events where event_id in ($1, $2)`, first, second); n != 2 {
				return fmt.Errorf("%d applied", n)
			}
			return nil
		})
		if n := len(d.replies(t, saga)); n != 0 {
			t.Fatalf("the carrier answered before the resend was applied (%d replies): the scenario did not happen", n)
		}
		r := d.waitReplies(t, saga, 1)[0]
		d.setFaults(t, map[string]string{"latency": "0s"})
		wantReply(t, r, contract.SagaStepRepliedV1CommandTypeShippingCreateShipment, second, contract.SagaStepRepliedV1OutcomeSucceeded, "")
		third := d.send(t, createCmd(saga, "10115")) // a resend after the answer: the same answer again
		again := d.waitReplies(t, saga, 2)[1]
		if again.CommandID != third {
			t.Fatalf("the repeated answer names %s, not the command it answers (%s)", again.CommandID, third)
		}
		again.CommandID = r.CommandID
		if again != r {
			t.Fatalf("second reply %+v, first %+v", again, r)
		}
		if n := len(d.shipmentsOf(saga + ":create_shipment")); n != 1 {
			t.Fatalf("%d carrier shipments for one key", n)
		}
	})

	t.Run("ATimedOutCreateIsLookedUpAndNotCreatedTwice", func(t *testing.T) {
		saga := testkit.UniqueName(t, "s")
		before := d.sim.Stats()
		d.setFaults(t, map[string]string{"hang-next": "1"})
		id := d.send(t, createCmd(saga, "10115"))
		r := d.waitReplies(t, saga, 1)[0]
		wantReply(t, r, contract.SagaStepRepliedV1CommandTypeShippingCreateShipment, id, contract.SagaStepRepliedV1OutcomeSucceeded, "")
		sh := d.shipmentsOf(saga + ":create_shipment")
		after := d.sim.Stats()
		if len(sh) != 1 || r.ShipmentID != sh[0].ID {
			t.Fatalf("reply %+v, carrier %+v", r, sh)
		}
		// The answer was withheld once; the shipment was then found by
		// its key, not by sending the create again.
		if after.Hung-before.Hung != 1 || after.IdempotentReplays != before.IdempotentReplays || after.Created-before.Created != 1 {
			t.Fatalf("carrier stats before %+v after %+v", before, after)
		}
	})

	t.Run("ADeclineIsAFailedReplyWithTheCarriersReason", func(t *testing.T) {
		saga := testkit.UniqueName(t, "s")
		id := d.send(t, createCmd(saga, "00000"))
		r := d.waitReplies(t, saga, 1)[0]
		wantReply(t, r, contract.SagaStepRepliedV1CommandTypeShippingCreateShipment, id, contract.SagaStepRepliedV1OutcomeFailed, carriersim.CodeUnsupportedPostalCode)
		if r.Retryable == nil || *r.Retryable || r.ShipmentID != "" {
			t.Fatalf("decline reply %+v", r)
		}
		// Compensating a declined step has nothing to void.
		cid := d.send(t, cancelCmd(saga))
		c := d.waitReplies(t, saga, 2)[1]
		wantReply(t, c, contract.SagaStepRepliedV1CommandTypeShippingCancelShipment, cid, contract.SagaStepRepliedV1OutcomeSucceeded, "")
		if n := len(d.shipmentsOf(saga + ":create_shipment")); n != 0 {
			t.Fatalf("%d shipments after a decline", n)
		}
	})

	t.Run("ServerErrorsAreRetriedWithBackoffUntilTheCarrierAnswers", func(t *testing.T) {
		saga := testkit.UniqueName(t, "s")
		before := d.sim.Stats()
		d.setFaults(t, map[string]string{"5xx-next": "3"})
		id := d.send(t, createCmd(saga, "10115"))
		r := d.waitReplies(t, saga, 1)[0]
		wantReply(t, r, contract.SagaStepRepliedV1CommandTypeShippingCreateShipment, id, contract.SagaStepRepliedV1OutcomeSucceeded, "")
		after := d.sim.Stats()
		if after.Injected5xx-before.Injected5xx != 3 || after.Created-before.Created != 1 || len(d.shipmentsOf(saga+":create_shipment")) != 1 {
			t.Fatalf("carrier stats before %+v after %+v", before, after)
		}
	})

	t.Run("ACommandContradictingItsKeyIsDeadLetteredAndChangesNothing", func(t *testing.T) {
		saga := testkit.UniqueName(t, "s")
		d.send(t, createCmd(saga, "10115"))
		r := d.waitReplies(t, saga, 1)[0]
		forged := createCmd(saga, "10117") // the same key, another address
		id := d.send(t, forged)
		testkit.Eventually(t, 30*time.Second, "the contradiction dead-lettered", func() error {
			reasons := testkit.Strings(t, d.pool, `select error from dead_letters where event_id = $1`, id)
			if len(reasons) != 1 {
				return fmt.Errorf("%d dead letters", len(reasons))
			}
			if !strings.Contains(reasons[0], "contradicts") {
				t.Fatalf("dead letter reason %q", reasons[0])
			}
			return nil
		})
		if got := d.replies(t, saga); len(got) != 1 || got[0] != r {
			t.Fatalf("replies after the contradiction: %+v", got)
		}
		if sh := d.shipmentsOf(saga + ":create_shipment"); len(sh) != 1 || sh[0].Address.PostalCode != "10115" {
			t.Fatalf("carrier shipments %+v", sh)
		}
	})

	t.Run("ACancelBeforeItsCreateLeavesNothingToShip", func(t *testing.T) {
		saga := testkit.UniqueName(t, "s")
		cid := d.send(t, cancelCmd(saga))
		c := d.waitReplies(t, saga, 1)[0]
		wantReply(t, c, contract.SagaStepRepliedV1CommandTypeShippingCancelShipment, cid, contract.SagaStepRepliedV1OutcomeSucceeded, "")
		id := d.send(t, createCmd(saga, "10115"))
		r := d.waitReplies(t, saga, 2)[1]
		wantReply(t, r, contract.SagaStepRepliedV1CommandTypeShippingCreateShipment, id, contract.SagaStepRepliedV1OutcomeFailed, "cancelled_before_created")
		if n := len(d.shipmentsOf(saga + ":create_shipment")); n != 0 {
			t.Fatalf("%d shipments after the cancel came first", n)
		}
	})

	t.Run("CancelOfAShippedParcelFailsForGood", func(t *testing.T) {
		saga := testkit.UniqueName(t, "s")
		d.send(t, createCmd(saga, "10115"))
		r := d.waitReplies(t, saga, 1)[0]
		if err := d.sim.Ship(r.ShipmentID); err != nil {
			t.Fatal(err)
		}
		cid := d.send(t, cancelCmd(saga))
		c := d.waitReplies(t, saga, 2)[1]
		wantReply(t, c, contract.SagaStepRepliedV1CommandTypeShippingCancelShipment, cid, contract.SagaStepRepliedV1OutcomeFailed, "shipment_already_shipped")
		if c.Retryable == nil || *c.Retryable {
			t.Fatalf("shipped is not retryable: %+v", c)
		}
	})
}

// A shipping-svc killed with -9 after the carrier created the shipment and
// before the outcome committed finds the shipment by its key on restart:
// the carrier creates one shipment and is not asked to create again.
func TestKill9BetweenTheCarrierCallAndTheCommitCreatesOneShipment(t *testing.T) {
	d := newDeployment(t)
	saga := testkit.UniqueName(t, "s")
	key := saga + ":create_shipment"
	d.setFaults(t, map[string]string{"hang-next": "1"})
	id := d.send(t, createCmd(saga, "10115"))
	testkit.Eventually(t, 30*time.Second, "the carrier created the shipment", func() error {
		if len(d.shipmentsOf(key)) != 1 {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	// The carrier withholds its answer (1s client timeout): the process
	// dies while the call is in flight.
	d.svc.Kill()
	if n := len(d.replies(t, saga)); n != 0 {
		t.Fatalf("%d replies before the outcome was known", n)
	}
	before := d.sim.Stats()
	if err := d.svc.Restart(); err != nil {
		t.Fatal(err)
	}
	d.waitReady()
	r := d.waitReplies(t, saga, 1)[0]
	wantReply(t, r, contract.SagaStepRepliedV1CommandTypeShippingCreateShipment, id, contract.SagaStepRepliedV1OutcomeSucceeded, "")
	sh := d.shipmentsOf(key)
	after := d.sim.Stats()
	if len(sh) != 1 || r.ShipmentID != sh[0].ID || after.Created != 1 || after.IdempotentReplays != before.IdempotentReplays {
		t.Fatalf("reply %+v, carrier shipments %+v, stats before restart %+v after %+v", r, sh, before, after)
	}
}

// A carrier that does not answer within the step's budget gets the command
// a failed, retryable reply; the same command sent again once the carrier
// is back starts a new budget and books exactly one shipment.
func TestACarrierDownForTheWholeBudgetIsARetryableFailureAndAResendBooksOnce(t *testing.T) {
	d := newDeployment(t, "STEP_BUDGET=2s")
	saga := testkit.UniqueName(t, "s")
	d.setFaults(t, map[string]string{"5xx-rate": "1"})
	id := d.send(t, createCmd(saga, "10115"))
	r := d.waitReplies(t, saga, 1)[0]
	wantReply(t, r, contract.SagaStepRepliedV1CommandTypeShippingCreateShipment, id, contract.SagaStepRepliedV1OutcomeFailed, "carrier_unavailable")
	if r.Retryable == nil || !*r.Retryable {
		t.Fatalf("give-up reply %+v is not retryable", r)
	}
	if st := d.sim.Stats(); st.Injected5xx < 2 {
		t.Fatalf("the carrier was tried %d times within the budget", st.Injected5xx)
	}
	d.setFaults(t, map[string]string{"5xx-rate": "0"})
	resend := d.send(t, createCmd(saga, "10115"))
	again := d.waitReplies(t, saga, 2)[1]
	wantReply(t, again, contract.SagaStepRepliedV1CommandTypeShippingCreateShipment, resend, contract.SagaStepRepliedV1OutcomeSucceeded, "")
	if sh := d.shipmentsOf(saga + ":create_shipment"); len(sh) != 1 || sh[0].ID != again.ShipmentID || sh[0].Status != carriersim.StatusCreated {
		t.Fatalf("carrier shipments %+v, reply %+v", sh, again)
	}
}

// SIGTERM lets a carrier call in flight finish and records its outcome and
// reply before the process exits: a label bought while stopping is not
// left for the lookup of the next start.
func TestSIGTERMRecordsTheCarrierCallInFlight(t *testing.T) {
	d := newDeployment(t)
	saga := testkit.UniqueName(t, "s")
	d.setFaults(t, map[string]string{"latency": "800ms"})
	before := d.sim.Stats().Requests
	id := d.send(t, createCmd(saga, "10115"))
	testkit.Eventually(t, 30*time.Second, "the create call in flight", func() error {
		if d.sim.Stats().Requests == before {
			return fmt.Errorf("no request yet")
		}
		return nil
	})
	if err := d.svc.Stop(syscall.SIGTERM, 10*time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	r := d.replies(t, saga)
	if len(r) != 1 {
		t.Fatalf("%d replies after a graceful stop", len(r))
	}
	wantReply(t, r[0], contract.SagaStepRepliedV1CommandTypeShippingCreateShipment, id, contract.SagaStepRepliedV1OutcomeSucceeded, "")
	if sh := d.shipmentsOf(saga + ":create_shipment"); len(sh) != 1 || sh[0].ID != r[0].ShipmentID {
		t.Fatalf("carrier %+v, reply %+v", sh, r[0])
	}
}
