// Package order is the order service's domain: what a valid order request
// is, the order's state machine and how saga events move it. It does no
// I/O; order/orderstore stores orders and order/orderapi serves the API.
//
//	PENDING ──inventory.reserved──▶ RESERVED ──payment.processed──▶ CONFIRMED
//	   │                               │
//	   ├─inventory.rejected────────────┼──▶ CANCELLED (out_of_stock)
//	   │                               ├─inventory.released──▶ CANCELLED (payment_declined, …)
//	   └─────────stuck too long────────┴──▶ CANCELLED (timeout)
//
// An orchestrated order waits in PENDING for the orchestrator's outcome:
// saga.finished COMPLETED confirms it, COMPENSATED or FAILED cancels it.
package order

import (
	"fmt"
	"math"
	"math/bits"
	"regexp"
	"strings"

	"github.com/concordhq/concord/schemas/contract"
)

// Status is an order's state.
type Status string

// Order statuses. CONFIRMED and CANCELLED are terminal.
const (
	StatusPending   Status = "PENDING"
	StatusReserved  Status = "RESERVED"
	StatusConfirmed Status = "CONFIRMED"
	StatusCancelled Status = "CANCELLED"
)

// Terminal reports whether no event moves the order any more.
func (s Status) Terminal() bool { return s == StatusConfirmed || s == StatusCancelled }

// ParseStatus accepts a status in any case.
func ParseStatus(s string) (Status, bool) {
	st := Status(strings.ToUpper(strings.TrimSpace(s)))
	switch st {
	case StatusPending, StatusReserved, StatusConfirmed, StatusCancelled:
		return st, true
	}
	return "", false
}

// Signal is something that happened to an order: a saga event or the
// sweeper's timeout.
type Signal string

// Signals, named after the events that carry them.
const (
	InventoryReserved = Signal(contract.TypeInventoryReserved)
	InventoryRejected = Signal(contract.TypeInventoryRejected)
	InventoryReleased = Signal(contract.TypeInventoryReleased)
	PaymentProcessed  = Signal(contract.TypePaymentProcessed)
	PaymentFailed     = Signal(contract.TypePaymentFailed)
	TimedOut          = Signal("timeout")
	// The orchestrated flow's outcomes, carried by saga.finished.
	SagaCompleted   = Signal("saga.completed")
	SagaCompensated = Signal("saga.compensated")
	SagaFailed      = Signal("saga.failed")
)

// Flow is how an order is checked out.
type Flow string

// Flows. Choreographed: the services react to each other's events
// (order.created → inventory → payment). Orchestrated: order-svc asks the
// orchestrator (saga.checkout_requested), which commands each participant
// in turn and reports the outcome (saga.finished).
const (
	FlowChoreographed Flow = "choreographed"
	FlowOrchestrated  Flow = "orchestrated"
)

// ParseFlow accepts a flow name; "" is not one.
func ParseFlow(s string) (Flow, bool) {
	switch f := Flow(s); f {
	case FlowChoreographed, FlowOrchestrated:
		return f, true
	}
	return "", false
}

// Cancellation reasons.
const (
	ReasonOutOfStock      = "out_of_stock"
	ReasonPaymentDeclined = "payment_declined"
	ReasonTimeout         = "timeout"
)

// Next is the state machine: the status after sig, and whether the order
// changes. A signal that does not apply (a duplicate, a late payment after
// cancellation, a payment failure that waits for the stock release) leaves
// the order as it is; the saga's other participants compensate.
//
// payment.processed may overtake inventory.reserved (they travel on
// different topics), so PENDING confirms directly. payment.failed does not
// cancel: the order waits for inventory.released, which follows it, so an
// order is only cancelled once its stock is back.
func Next(s Status, sig Signal) (Status, bool) {
	if s.Terminal() {
		return s, false
	}
	switch sig {
	case InventoryReserved:
		if s == StatusPending {
			return StatusReserved, true
		}
	case PaymentProcessed, SagaCompleted:
		return StatusConfirmed, true
	case InventoryRejected, InventoryReleased, TimedOut, SagaCompensated, SagaFailed:
		return StatusCancelled, true
	}
	return s, false
}

// Limits of an order request. Identifiers (customer_id, sku,
// payment_method) are at most MaxIDLen bytes of letters, digits and _.:-;
// the Idempotency-Key header at most MaxIdempotencyKeyLen bytes. Address
// fields are free text without NUL bytes (PostgreSQL text and jsonb refuse
// them), bounded so that a stored order stays small.
const (
	MaxItems    = 100
	MaxQuantity = 10_000
	MaxPrice    = 100_000_000 // minor units

	MaxIDLen             = 64
	MaxIdempotencyKeyLen = 255
	MaxAddressLineLen    = 200 // line1, line2
	MaxCityLen           = 100
	MaxPostalCodeLen     = 20
)

// Item is one line of an order. UnitPrice is in minor units (cents).
type Item struct {
	SKU       string `json:"sku"`
	Quantity  int64  `json:"quantity"`
	UnitPrice int64  `json:"unit_price"`
}

// Address is a shipping address.
type Address struct {
	Line1      string `json:"line1"`
	Line2      string `json:"line2,omitempty"`
	City       string `json:"city"`
	PostalCode string `json:"postal_code"`
	Country    string `json:"country"`
}

// Request is what a client asks for. PaymentMethod is the provider's
// payment method id (pm_card_visa when empty).
type Request struct {
	CustomerID      string   `json:"customer_id"`
	Items           []Item   `json:"items"`
	Currency        string   `json:"currency"`
	ShippingAddress *Address `json:"shipping_address,omitempty"`
	PaymentMethod   string   `json:"payment_method,omitempty"`
	// Flow chooses the checkout: choreographed or orchestrated; empty
	// takes the service's default (order-svc --default-flow).
	Flow Flow `json:"flow,omitempty"`
}

// DefaultPaymentMethod is charged when a request names none.
const DefaultPaymentMethod = "pm_card_visa"

// FieldError names the field of a request that is wrong and why.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

var (
	currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)
	countryRE  = regexp.MustCompile(`^[A-Z]{2}$`)
	idRE       = regexp.MustCompile(fmt.Sprintf(`^[A-Za-z0-9_.:\-]{1,%d}$`, MaxIDLen))
)

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Validate checks r and returns the first problem as a *FieldError.
func (r *Request) Validate() error {
	if !idRE.MatchString(r.CustomerID) {
		return fieldErr("customer_id", "required: 1-64 letters, digits or _.:-")
	}
	if !currencyRE.MatchString(r.Currency) {
		return fieldErr("currency", "must be a three-letter upper-case ISO 4217 code such as EUR")
	}
	if len(r.Items) == 0 {
		return fieldErr("items", "at least one item is required")
	}
	if len(r.Items) > MaxItems {
		return fieldErr("items", "at most %d items", MaxItems)
	}
	for i, it := range r.Items {
		f := fmt.Sprintf("items[%d]", i)
		if !idRE.MatchString(it.SKU) {
			return fieldErr(f+".sku", "required: 1-64 letters, digits or _.:-")
		}
		if it.Quantity < 1 || it.Quantity > MaxQuantity {
			return fieldErr(f+".quantity", "must be between 1 and %d", MaxQuantity)
		}
		if it.UnitPrice < 0 || it.UnitPrice > MaxPrice {
			return fieldErr(f+".unit_price", "must be between 0 and %d (minor units)", MaxPrice)
		}
	}
	if _, ok := r.total(); !ok {
		return fieldErr("items", "the sum of quantity × unit_price overflows")
	}
	if a := r.ShippingAddress; a != nil {
		for _, f := range []struct {
			name, value string
			required    bool
			max         int
		}{
			{"shipping_address.line1", a.Line1, true, MaxAddressLineLen},
			{"shipping_address.line2", a.Line2, false, MaxAddressLineLen},
			{"shipping_address.city", a.City, true, MaxCityLen},
			{"shipping_address.postal_code", a.PostalCode, true, MaxPostalCodeLen},
		} {
			switch {
			case strings.ContainsRune(f.value, 0):
				return fieldErr(f.name, "must not contain NUL bytes")
			case len(f.value) > f.max:
				return fieldErr(f.name, "at most %d bytes", f.max)
			case f.required && strings.TrimSpace(f.value) == "":
				return fieldErr(f.name, "required")
			}
		}
		if !countryRE.MatchString(a.Country) {
			return fieldErr("shipping_address.country", "must be a two-letter upper-case ISO 3166 code such as DE")
		}
	}
	if r.PaymentMethod != "" && !idRE.MatchString(r.PaymentMethod) {
		return fieldErr("payment_method", "1-64 letters, digits or _.:-")
	}
	if r.Flow != "" {
		if _, ok := ParseFlow(string(r.Flow)); !ok {
			return fieldErr("flow", "must be %q or %q", FlowChoreographed, FlowOrchestrated)
		}
	}
	if r.Flow == FlowOrchestrated && r.ShippingAddress == nil {
		return fieldErr("shipping_address", "required when flow is %q: the orchestrated checkout ships the order", FlowOrchestrated)
	}
	if t, _ := r.total(); r.Flow == FlowOrchestrated && t == 0 {
		return fieldErr("items", "the orchestrated checkout places an authorization hold: the total must be positive")
	}
	return nil
}

// Total is the order's amount in minor units. Validate refuses a request
// whose total overflows int64 (its limits keep it far below that), so
// Total is exact for a valid request; for an invalid one it may be
// math.MaxInt64.
func (r *Request) Total() int64 {
	t, _ := r.total()
	return t
}

// total sums quantity × unit_price without overflowing: false, with
// math.MaxInt64, when a product or the sum leaves int64 or a factor is
// negative.
func (r *Request) total() (int64, bool) {
	var sum uint64
	for _, it := range r.Items {
		if it.Quantity < 0 || it.UnitPrice < 0 {
			return math.MaxInt64, false
		}
		hi, lo := bits.Mul64(uint64(it.Quantity), uint64(it.UnitPrice))
		var carry uint64
		sum, carry = bits.Add64(sum, lo, 0)
		if hi != 0 || carry != 0 || sum > math.MaxInt64 {
			return math.MaxInt64, false
		}
	}
	return int64(sum), true
}
