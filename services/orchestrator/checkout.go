package orchestrator

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/concordhq/concord/schemas/contract"
)

// CheckoutName is the checkout saga's name (saga_executions.saga_name).
const CheckoutName = "checkout"

// Steps of the checkout saga, in order.
const (
	StepReserveCredit    = "reserve_credit"
	StepReserveInventory = "reserve_inventory"
	StepCreateShipment   = "create_shipment"
	StepCapturePayment   = "capture_payment"
)

// Context keys the checkout's replies fill.
const (
	CtxProviderPaymentID = "provider_payment_id"
	CtxShipmentID        = "shipment_id"
)

// DefaultPolicy is the checkout's step policy unless configured: a reply
// within 30s, three sends of an execute command, eight of a compensation,
// retries 200ms apart doubling up to 10s.
var DefaultPolicy = Policy{Timeout: 30 * time.Second, Attempts: 3, CompensationAttempts: 8,
	BackoffMin: 200 * time.Millisecond, BackoffMax: 10 * time.Second}

// ErrBadCheckout is wrapped by CheckoutInput for a request the saga cannot
// run (the consumer dead-letters it).
var ErrBadCheckout = errors.New("checkout request cannot run")

// CheckoutInput decodes and checks the stored input of a checkout saga.
// Shipping needs an address, so a request without one cannot start.
func CheckoutInput(data []byte) (contract.SagaCheckoutRequestedV1, error) {
	var in contract.SagaCheckoutRequestedV1
	if err := json.Unmarshal(data, &in); err != nil {
		return in, fmt.Errorf("%w: %v", ErrBadCheckout, err)
	}
	switch {
	case in.ShippingAddress == nil:
		return in, fmt.Errorf("%w: order %s has no shipping_address", ErrBadCheckout, in.OrderID)
	case in.TotalAmount < 1:
		return in, fmt.Errorf("%w: order %s total_amount %d: a hold needs a positive amount", ErrBadCheckout, in.OrderID, in.TotalAmount)
	}
	return in, nil
}

// Checkout is seed 001's saga, durable: reserve_credit (an authorization
// hold) → reserve_inventory → create_shipment → capture_payment. On a
// failure the executed steps are undone in reverse: cancel the shipment,
// release the stock, cancel the hold (payment-svc refunds instead when it
// was captured). capture_payment has no compensation of its own: it is
// last, and the hold's compensation undoes a capture.
func Checkout(p Policy) *Definition {
	return &Definition{Name: CheckoutName, Steps: []StepDef{
		{Name: StepReserveCredit, Policy: p,
			ExecuteType: contract.TypePaymentAuthorizeHold, Execute: checkoutCmd(func(in contract.SagaCheckoutRequestedV1, _ Input, c sagaCommand) contract.Payload {
				return contract.PaymentAuthorizeHoldV1{SagaID: c.sagaID, Step: c.Step, IdempotencyKey: c.Key, Attempt: int64(c.Attempt), OrderID: in.OrderID,
					CustomerID: in.CustomerID, Amount: in.TotalAmount, Currency: in.Currency, PaymentMethod: in.PaymentMethod}
			}),
			CompensateType: contract.TypePaymentCancelHold, Compensate: checkoutCmd(func(in contract.SagaCheckoutRequestedV1, x Input, c sagaCommand) contract.Payload {
				return contract.PaymentCancelHoldV1{SagaID: c.sagaID, Step: c.Step, IdempotencyKey: c.Key, Attempt: int64(c.Attempt), OrderID: in.OrderID,
					HoldKey: ExecuteKey(c.sagaID, StepReserveCredit), ProviderPaymentID: x.Context[CtxProviderPaymentID],
					Amount: in.TotalAmount, Currency: in.Currency, Reason: x.Context[ctxReason]}
			})},
		{Name: StepReserveInventory, Policy: p,
			ExecuteType: contract.TypeInventoryReserveStock, Execute: checkoutCmd(func(in contract.SagaCheckoutRequestedV1, _ Input, c sagaCommand) contract.Payload {
				return contract.InventoryReserveStockV1{SagaID: c.sagaID, Step: c.Step, IdempotencyKey: c.Key, Attempt: int64(c.Attempt), OrderID: in.OrderID,
					Items: stockItems[contract.InventoryReserveStockV1Item](in)}
			}),
			CompensateType: contract.TypeInventoryReleaseStock, Compensate: checkoutCmd(func(in contract.SagaCheckoutRequestedV1, x Input, c sagaCommand) contract.Payload {
				return contract.InventoryReleaseStockV1{SagaID: c.sagaID, Step: c.Step, IdempotencyKey: c.Key, Attempt: int64(c.Attempt), OrderID: in.OrderID,
					ReservationKey: ExecuteKey(c.sagaID, StepReserveInventory), Items: stockItems[contract.InventoryReleaseStockV1Item](in), Reason: x.Context[ctxReason]}
			})},
		{Name: StepCreateShipment, Policy: p,
			ExecuteType: contract.TypeShippingCreateShipment, Execute: checkoutCmd(func(in contract.SagaCheckoutRequestedV1, _ Input, c sagaCommand) contract.Payload {
				a := in.ShippingAddress
				return contract.ShippingCreateShipmentV1{SagaID: c.sagaID, Step: c.Step, IdempotencyKey: c.Key, Attempt: int64(c.Attempt), OrderID: in.OrderID,
					Items:   stockItems[contract.ShippingCreateShipmentV1Item](in),
					Address: contract.ShippingCreateShipmentV1Address{Line1: a.Line1, Line2: a.Line2, City: a.City, PostalCode: a.PostalCode, Country: a.Country}}
			}),
			CompensateType: contract.TypeShippingCancelShipment, Compensate: checkoutCmd(func(in contract.SagaCheckoutRequestedV1, x Input, c sagaCommand) contract.Payload {
				return contract.ShippingCancelShipmentV1{SagaID: c.sagaID, Step: c.Step, IdempotencyKey: c.Key, Attempt: int64(c.Attempt), OrderID: in.OrderID,
					ShipmentKey: ExecuteKey(c.sagaID, StepCreateShipment), ShipmentID: x.Context[CtxShipmentID], Reason: x.Context[ctxReason]}
			})},
		{Name: StepCapturePayment, Policy: p,
			ExecuteType: contract.TypePaymentCaptureHold, Execute: checkoutCmd(func(in contract.SagaCheckoutRequestedV1, x Input, c sagaCommand) contract.Payload {
				return contract.PaymentCaptureHoldV1{SagaID: c.sagaID, Step: c.Step, IdempotencyKey: c.Key, Attempt: int64(c.Attempt), OrderID: in.OrderID,
					HoldKey: ExecuteKey(c.sagaID, StepReserveCredit), ProviderPaymentID: x.Context[CtxProviderPaymentID],
					Amount: in.TotalAmount, Currency: in.Currency}
			})},
	}}
}

// ctxReason is the Context key the builder of a compensation reads its
// reason from; Build fills it from the saga's error.
const ctxReason = "_reason"

// sagaCommand is a Command with the saga id, for the checkout builders.
type sagaCommand struct {
	Command
	sagaID string
}

func checkoutCmd(build func(in contract.SagaCheckoutRequestedV1, x Input, c sagaCommand) contract.Payload) Builder {
	return func(x Input, c Command) (contract.Payload, error) {
		in, err := CheckoutInput(x.Data)
		if err != nil {
			return nil, err
		}
		return build(in, x, sagaCommand{Command: c, sagaID: x.SagaID}), nil
	}
}

// stockItems are the order's lines without prices, as the inventory and
// shipping commands carry them.
func stockItems[T ~struct {
	SKU      string `json:"sku"`
	Quantity int64  `json:"quantity"`
}](in contract.SagaCheckoutRequestedV1) []T {
	out := make([]T, len(in.Items))
	for i, it := range in.Items {
		out[i] = T{SKU: it.SKU, Quantity: it.Quantity}
	}
	return out
}

// Build is the payload of command c of saga s, whose stored input is data.
func Build(def *Definition, s Saga, data []byte, c Command) (contract.Payload, error) {
	sd := def.Steps[c.Order]
	b := sd.Execute
	if c.Kind == Compensate {
		b = sd.Compensate
	}
	if b == nil {
		return nil, fmt.Errorf("saga %s step %s has no %s command", s.ID, sd.Name, c.Kind)
	}
	x := Input{SagaID: s.ID, Data: data, Context: s.Context}
	if c.Kind == Compensate {
		x.Context = map[string]string{ctxReason: s.Error}
		for k, v := range s.Context {
			x.Context[k] = v
		}
	}
	return b(x, c)
}
