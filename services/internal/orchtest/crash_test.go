package orchtest

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/schemas/contract"
)

// The orchestrator killed with SIGKILL at each point of a step — before
// the command is written (requests wait while it is down), after the
// command is published and before its reply (replies held), and between
// a reply and the next command (replies sent while it is down) — resumes
// every saga from its tables when restarted, and sends no command twice.
func TestKill9AtEachPointOfAStepResumesEverySagaAndSendsNoCommandTwice(t *testing.T) {
	d := newDeployment(t, opts{})
	const n = 8

	// Before the command is written.
	d.kill9(0)
	var ids []string
	for range n {
		ids = append(ids, d.checkout(nil))
	}
	d.fakes.holdAll(true)
	d.restart(0)

	// After the command is published, before its reply.
	testkit.Eventually(t, 60*time.Second, "every first command received", func() error {
		if h := d.fakes.heldCount(); h < n {
			return fmt.Errorf("%d of %d held", h, n)
		}
		return nil
	})
	if running := testkit.Count(t, d.pool, `select count(*) from saga_steps where step_name = 'reserve_credit' and step_status = 'running'`); running != n {
		t.Fatalf("%d reserve_credit steps running, want %d", running, n)
	}
	d.kill9(0)

	// Between the reply and the next command.
	d.fakes.holdAll(false)
	if got := d.fakes.release(context.Background()); got != n {
		t.Fatalf("released %d replies, want %d", got, n)
	}
	d.restart(0)

	st := d.waitTerminal(90*time.Second, ids...)
	all4 := once("reserve_credit", "reserve_inventory", "create_shipment", "capture_payment")
	for _, id := range ids {
		if st[id] != "COMPLETED" {
			t.Errorf("saga %s: %s", id, st[id])
		}
		if got := d.sent(id); !maps.Equal(got, all4) {
			t.Errorf("saga %s: commands sent %v, want each once", id, got)
		}
	}
	if n := testkit.Count(t, d.pool, `select count(*) from saga_steps where attempts <> 1`); n != 0 {
		t.Errorf("%d steps sent more than once", n)
	}
}

// Two orchestrators on one database and group, under timeouts, refusals
// and compensations, and one of them killed midway: every saga ends, and
// each command went out exactly as often as the saga's rows say it was
// sent — no saga was driven by both at once.
func TestTwoInstancesNeverDriveOneSagaAtOnce(t *testing.T) {
	// Sends outlast the killed member's partitions moving to the other
	// (the 6s session timeout and a rebalance): replies waiting in them
	// arrive before the step runs out of attempts.
	d := newDeployment(t, opts{instances: 2, timeout: 2 * time.Second, attempts: 6, compensationAttempts: 4})
	plans := []plan{
		nil,
		{contract.TypeInventoryReserveStock: {silent}},
		{contract.TypeShippingCreateShipment: {refuse}, contract.TypeInventoryReleaseStock: {refuse}},
		{contract.TypePaymentCaptureHold: {silent, refuse}},
		{contract.TypePaymentAuthorizeHold: {retryable}},
		{contract.TypeShippingCreateShipment: {silent, silent, silent, silent, silent, silent}},
	}
	var ids []string
	for i := range 24 {
		ids = append(ids, d.checkout(plans[i%len(plans)]))
		if i == 12 {
			d.kill9(0)
		}
	}
	st := d.waitTerminal(90*time.Second, ids...)
	for i, id := range ids {
		want := "COMPLETED"
		if i%len(plans) >= 2 && i%len(plans) != 4 {
			want = "COMPENSATED"
		}
		if st[id] != want {
			t.Errorf("saga %s (plan %d): %s, want %s", id, i%len(plans), st[id], want)
		}
		// Sends recorded by the saga, per key, against the distinct
		// commands the participants received.
		rows, err := d.pool.Query(context.Background(), `select step_name, attempts, compensation_attempts from saga_steps s where s.saga_id = $1`, id)
		if err != nil {
			t.Fatal(err)
		}
		want2 := map[string]int{}
		for rows.Next() {
			var step string
			var a, c int
			if err := rows.Scan(&step, &a, &c); err != nil {
				t.Fatal(err)
			}
			want2[step] = a
			if c > 0 {
				want2[step+"_compensate"] = c
			}
		}
		if got := d.sent(id); !maps.Equal(got, want2) {
			t.Errorf("saga %s (plan %d): commands received %v, recorded sends %v", id, i%len(plans), got, want2)
		}
	}
	if d.metric("concord_saga_step_timeouts_total") < 1 {
		t.Error("no step timeout counted by the surviving instance")
	}
}

// A reply that never comes: the command is sent again under the same key
// after the step's timeout; when no send is answered, the step fails and,
// since it may have taken effect, is compensated with the steps before it.
func TestStepTimeoutResendsAndThenCompensatesTheSilentStep(t *testing.T) {
	d := newDeployment(t, opts{timeout: 2 * time.Second, attempts: 2})
	late := d.checkout(plan{contract.TypeShippingCreateShipment: {silent}})
	never := d.checkout(plan{contract.TypeShippingCreateShipment: {silent, silent}})
	st := d.waitTerminal(60*time.Second, late, never)

	if st[late] != "COMPLETED" {
		t.Errorf("answered on the second send: %s", st[late])
	}
	want := once("reserve_credit", "reserve_inventory", "capture_payment")
	want["create_shipment"] = 2
	if got := d.sent(late); !maps.Equal(got, want) {
		t.Errorf("answered on the second send: sent %v, want %v", got, want)
	}
	if st[never] != "COMPENSATED" {
		t.Errorf("never answered: %s", st[never])
	}
	want = once("reserve_credit", "reserve_inventory", "create_shipment_compensate", "reserve_inventory_compensate", "reserve_credit_compensate")
	want["create_shipment"] = 2
	if got := d.sent(never); !maps.Equal(got, want) {
		t.Errorf("never answered: sent %v, want %v", got, want)
	}
	var uncertain bool
	var stepErr string
	if err := d.pool.QueryRow(context.Background(), `select uncertain, step_error from saga_steps s where s.saga_id = $1 and step_name = 'create_shipment'`,
		never).Scan(&uncertain, &stepErr); err != nil || !uncertain {
		t.Errorf("silent step: uncertain %v error %q (%v)", uncertain, stepErr, err)
	}
	if got := d.metric("concord_saga_step_timeouts_total", `step="create_shipment"`); got != 3 {
		t.Errorf("create_shipment timeouts %v, want 3", got)
	}
}
