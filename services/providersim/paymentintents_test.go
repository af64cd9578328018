package providersim_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/concordhq/concord/services/providersim"
	"github.com/stripe/stripe-go/v84"
)

func TestCreateAndConfirmWithSucceedingCardSucceeds(t *testing.T) {
	h := start(t, providersim.Config{})
	sc := h.client()
	pi := h.mustCreate(sc, providersim.PaymentMethodVisa, 1999, "pay-1")
	if pi.Status != stripe.PaymentIntentStatusSucceeded || pi.AmountReceived != 1999 || pi.Currency != "eur" {
		t.Fatalf("got status %s received %d currency %s, want succeeded 1999 eur", pi.Status, pi.AmountReceived, pi.Currency)
	}
	if pi.Metadata["order_id"] != "ord_pay-1" || pi.LatestCharge == nil || pi.LatestCharge.ID == "" {
		t.Fatalf("metadata %v / latest charge %+v not kept", pi.Metadata, pi.LatestCharge)
	}
	got, err := sc.V1PaymentIntents.Retrieve(t.Context(), pi.ID, nil)
	if err != nil {
		t.Fatalf("retrieve %s: %v", pi.ID, err)
	}
	if got.ID != pi.ID || got.Status != pi.Status || got.Created != h.clock.Now().Unix() {
		t.Fatalf("retrieve gave %s %s created %d, want %s %s created %d", got.ID, got.Status, got.Created, pi.ID, pi.Status, h.clock.Now().Unix())
	}
}

func TestCreateWithoutConfirmThenConfirmAndCancel(t *testing.T) {
	h := start(t, providersim.Config{})
	sc := h.client()
	pi, err := sc.V1PaymentIntents.Create(t.Context(), &stripe.PaymentIntentCreateParams{
		Amount: stripe.Int64(500), Currency: stripe.String("usd")})
	if err != nil || pi.Status != stripe.PaymentIntentStatusRequiresPaymentMethod {
		t.Fatalf("create: %v, status %v", err, pi)
	}
	_, err = sc.V1PaymentIntents.Confirm(t.Context(), pi.ID, nil)
	if se := stripeErr(t, err); se.Code != stripe.ErrorCodeParameterMissing || se.Param != "payment_method" {
		t.Fatalf("confirm without a payment method: %s %s, want parameter_missing payment_method", se.Code, se.Param)
	}
	pi, err = sc.V1PaymentIntents.Confirm(t.Context(), pi.ID, &stripe.PaymentIntentConfirmParams{PaymentMethod: stripe.String(providersim.PaymentMethodVisa)})
	if err != nil || pi.Status != stripe.PaymentIntentStatusSucceeded {
		t.Fatalf("confirm: %v, %v", err, pi)
	}
	_, err = sc.V1PaymentIntents.Cancel(t.Context(), pi.ID, nil)
	if se := stripeErr(t, err); se.Code != stripe.ErrorCodePaymentIntentUnexpectedState || se.HTTPStatusCode != http.StatusBadRequest {
		t.Fatalf("canceling a succeeded payment: got %d %s, want 400 payment_intent_unexpected_state", se.HTTPStatusCode, se.Code)
	}
	other, err := sc.V1PaymentIntents.Create(t.Context(), &stripe.PaymentIntentCreateParams{
		Amount: stripe.Int64(500), Currency: stripe.String("usd"), PaymentMethod: stripe.String(providersim.PaymentMethodVisa)})
	if err != nil || other.Status != stripe.PaymentIntentStatusRequiresConfirmation {
		t.Fatalf("create with method: %v, %v", err, other)
	}
	other, err = sc.V1PaymentIntents.Cancel(t.Context(), other.ID, &stripe.PaymentIntentCancelParams{CancellationReason: stripe.String("abandoned")})
	if err != nil || other.Status != stripe.PaymentIntentStatusCanceled || other.CanceledAt == 0 {
		t.Fatalf("cancel: %v, %+v", err, other)
	}
}

func TestDeclinedCardAnswers402AndLeavesIntentRequiringPaymentMethod(t *testing.T) {
	h := start(t, providersim.Config{})
	sc := h.client()
	_, err := h.create(sc, providersim.PaymentMethodDeclined, 1000, "pay-declined")
	se := stripeErr(t, err)
	if se.HTTPStatusCode != http.StatusPaymentRequired || se.Type != stripe.ErrorTypeCard || se.Code != stripe.ErrorCodeCardDeclined {
		t.Fatalf("got %d %s %s, want 402 card_error card_declined", se.HTTPStatusCode, se.Type, se.Code)
	}
	if se.PaymentIntent == nil || se.PaymentIntent.Status != stripe.PaymentIntentStatusRequiresPaymentMethod {
		t.Fatalf("error carries payment intent %+v, want one in requires_payment_method", se.PaymentIntent)
	}
	pi, err := sc.V1PaymentIntents.Retrieve(t.Context(), se.PaymentIntent.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pi.LastPaymentError == nil || pi.LastPaymentError.Code != stripe.ErrorCodeCardDeclined || pi.LastPaymentError.DeclineCode != "generic_decline" {
		t.Fatalf("last_payment_error = %+v, want card_declined/generic_decline", pi.LastPaymentError)
	}
	// A declined intent can be confirmed again with another card.
	pi, err = sc.V1PaymentIntents.Confirm(t.Context(), pi.ID, &stripe.PaymentIntentConfirmParams{PaymentMethod: stripe.String(providersim.PaymentMethodVisa)})
	if err != nil || pi.Status != stripe.PaymentIntentStatusSucceeded || pi.LastPaymentError != nil {
		t.Fatalf("re-confirm with visa: %v, %+v", err, pi)
	}
}

func TestProcessingCardResolvesAfterProcessingDelay(t *testing.T) {
	f := providersim.DefaultFaults()
	f.ProcessingDelay = time.Minute
	h := start(t, providersim.Config{Faults: f})
	sc := h.client()
	pi := h.mustCreate(sc, providersim.PaymentMethodProcessing, 700, "pay-processing")
	if pi.Status != stripe.PaymentIntentStatusProcessing {
		t.Fatalf("status %s, want processing", pi.Status)
	}
	h.clock.Advance(59 * time.Second)
	if got, _ := sc.V1PaymentIntents.Retrieve(t.Context(), pi.ID, nil); got.Status != stripe.PaymentIntentStatusProcessing {
		t.Fatalf("before the delay: status %s, want processing", got.Status)
	}
	h.clock.Advance(time.Second)
	eventually(t, "processing payment to succeed", func() bool {
		got, err := sc.V1PaymentIntents.Retrieve(t.Context(), pi.ID, nil)
		return err == nil && got.Status == stripe.PaymentIntentStatusSucceeded
	})
}

func TestRefundKeepsIntentSucceededAndShowsOnCharge(t *testing.T) {
	h := start(t, providersim.Config{})
	sc := h.client()
	pi := h.mustCreate(sc, providersim.PaymentMethodVisa, 1000, "pay-refund")
	p := &stripe.RefundCreateParams{PaymentIntent: stripe.String(pi.ID), Amount: stripe.Int64(400)}
	rf, err := sc.V1Refunds.Create(t.Context(), p)
	if err != nil || rf.Amount != 400 || rf.Status != stripe.RefundStatusSucceeded || rf.PaymentIntent.ID != pi.ID {
		t.Fatalf("refund: %v %+v", err, rf)
	}
	got, err := sc.V1Refunds.Retrieve(t.Context(), rf.ID, nil)
	if err != nil || got.ID != rf.ID {
		t.Fatalf("retrieve refund: %v %+v", err, got)
	}
	_, err = sc.V1Refunds.Create(t.Context(), &stripe.RefundCreateParams{PaymentIntent: stripe.String(pi.ID), Amount: stripe.Int64(601)})
	if se := stripeErr(t, err); se.Code != stripe.ErrorCodeAmountTooLarge {
		t.Fatalf("over-refund: got %s, want amount_too_large", se.Code)
	}
	rp := &stripe.PaymentIntentRetrieveParams{}
	rp.AddExpand("latest_charge")
	after, err := sc.V1PaymentIntents.Retrieve(t.Context(), pi.ID, rp)
	if err != nil || after.Status != stripe.PaymentIntentStatusSucceeded || after.LatestCharge.AmountRefunded != 400 || after.LatestCharge.Refunded {
		t.Fatalf("after refund: %v status %s charge %+v", err, after.Status, after.LatestCharge)
	}
	_, err = sc.V1Refunds.Retrieve(t.Context(), "re_missing", nil)
	if se := stripeErr(t, err); se.HTTPStatusCode != 404 || se.Code != stripe.ErrorCodeResourceMissing {
		t.Fatalf("unknown refund: %d %s", se.HTTPStatusCode, se.Code)
	}
}
