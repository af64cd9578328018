package charger_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/services/payment/charger"
	"github.com/concordhq/concord/services/payment/paymentstore"
	"github.com/concordhq/concord/services/providersim"
)

// wakeRig is a charger over a fresh database and a simulator whose first
// answer per order is lost when lose is set.
func wakeRig(t *testing.T, poll time.Duration, lose bool) (*pgxpool.Pool, *charger.Charger, *attempts) {
	t.Helper()
	pool := testkit.NewPool(t, outbox.Migrate, paymentstore.Migrate)
	_, door, gw := provider(t, providersim.DefaultFaults(), lose)
	c, err := charger.New(charger.Config{Pool: pool, Outbox: outbox.Writer{}, Gateway: gw, PollInterval: poll, Lease: 10 * providerTimeout})
	if err != nil {
		t.Fatal(err)
	}
	return pool, c, door
}

// The charger is woken when work is committed, but a wake-up can be lost
// (a process between its commit and its nudge, another instance's
// commit): a payment stored with no nudge at all is still charged, by the
// poll, after at most one PollInterval.
func TestAPaymentStoredWithoutANudgeIsChargedByThePoll(t *testing.T) {
	pool, c, _ := wakeRig(t, 300*time.Millisecond, false)
	// Once the payment stored before the start is paid, the charger's
	// first claim is behind it.
	warm := "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9e00"
	intents(t, pool, []string{warm})
	run(t, c)
	testkit.Eventually(t, 10*time.Second, "the payment stored before the start charged", func() error { return paid(pool, warm) })
	orders := []string{"0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9e01", "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9e02"}
	intents(t, pool, orders) // no Nudge
	testkit.Eventually(t, 10*time.Second, "the payments stored without a nudge charged", func() error { return paid(pool, orders...) })
}

// With the poll an hour away, a nudge is what starts a charge, and a
// retry the charger schedules (a lost answer, tried again after 200ms with
// the same key) wakes it when due: neither waits for the poll.
func TestANudgeStartsAChargeAndARetryWakesTheChargerWhenDue(t *testing.T) {
	pool, c, door := wakeRig(t, time.Hour, true)
	// A payment stored before the charger starts is taken by its first
	// claim (and retried after its lost answer): once it is paid, the
	// charger has nothing due and waits.
	first, second := "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9e03", "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9e04"
	intents(t, pool, []string{first})
	run(t, c)
	testkit.Eventually(t, 15*time.Second, "the payment stored before the start charged", func() error { return paid(pool, first) })

	intents(t, pool, []string{second})
	c.Nudge()
	testkit.Eventually(t, 15*time.Second, "the nudged payment charged after its lost answer was retried", func() error {
		if err := paid(pool, second); err != nil {
			return err
		}
		if n := len(door.of(second)); n < 2 {
			return fmt.Errorf("%d create-and-confirm calls; want the first (answer lost) and its retry", n)
		}
		return nil
	})
}
