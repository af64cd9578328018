package paymentstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/payment/paymentstore"
)

// A saga's capture and its compensation can both be pending, even due at
// once (the orchestrator gave up waiting for the capture): the cancel is
// taken up only once the capture is answered, never in the same pass,
// never while the capture is out on its lease.
func TestClaimTakesACancelOnlyAfterTheCaptureReceivedBeforeIt(t *testing.T) {
	pool := newDB(t)
	ctx := context.Background()
	a, b := schemas.NewEventID(), schemas.NewEventID()
	cmd := func(saga string, typ contract.Type, step string) paymentstore.HoldCommand {
		return paymentstore.HoldCommand{Key: saga + ":" + step, Type: typ, CommandID: schemas.NewEventID(), SagaID: saga, Step: step,
			HoldKey: saga + ":reserve_credit", Amount: 100, Currency: "EUR"}
	}
	receive := func(cs ...paymentstore.HoldCommand) {
		t.Helper()
		inTx(t, pool, func(tx pgx.Tx) error {
			for _, c := range cs {
				var hold *paymentstore.Hold
				if c.Type == contract.TypePaymentAuthorizeHold {
					hold = &paymentstore.Hold{Key: c.HoldKey, SagaID: c.SagaID, OrderID: c.SagaID, Amount: 100, Currency: "EUR"}
				}
				if _, _, err := paymentstore.ReceiveHoldCommand(ctx, tx, c, hold); err != nil {
					return err
				}
			}
			return nil
		})
	}
	answer := func(c paymentstore.HoldCommand) {
		t.Helper()
		r := paymentstore.HoldReply{Outcome: contract.SagaStepRepliedV1OutcomeSucceeded}
		if _, err := paymentstore.SettleHoldCommand(ctx, pool, outbox.Writer{}, c, paymentstore.HoldChange{}, r); err != nil {
			t.Fatal(err)
		}
	}

	authA, authB := cmd(a, contract.TypePaymentAuthorizeHold, "reserve_credit"), cmd(b, contract.TypePaymentAuthorizeHold, "reserve_credit")
	receive(authA, authB)
	answer(authA)
	answer(authB)
	// One consumer batch, in the order sent.
	capA, cancelA, capB := cmd(a, contract.TypePaymentCaptureHold, "capture_payment"),
		cmd(a, contract.TypePaymentCancelHold, "reserve_credit_compensate"), cmd(b, contract.TypePaymentCaptureHold, "capture_payment")
	receive(capA, cancelA, capB)

	if got := claimKeys(t, pool); !slices.Equal(got, sorted(capA.Key, capB.Key)) {
		t.Fatalf("first pass claimed %v, want the two captures and not the cancel behind one of them", got)
	}
	if got := claimKeys(t, pool); len(got) != 0 {
		t.Fatalf("claimed %v while the capture before it is out, want nothing", got)
	}
	answer(capA)
	if got := claimKeys(t, pool); !slices.Equal(got, []string{cancelA.Key}) {
		t.Fatalf("claimed %v after the capture was answered, want the cancel", got)
	}
}

func claimKeys(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	cs, err := paymentstore.ClaimHoldCommands(context.Background(), pool, 16, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, c := range cs {
		keys = append(keys, c.Key)
	}
	return sorted(keys...)
}

func sorted(s ...string) []string { slices.Sort(s); return s }
