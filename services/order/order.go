// Package order is the order service's domain: what a valid order request
// is, the order's state machine and how saga events move it. It does no
// I/O; order/orderstore stores orders and order/orderapi serves the API.
//
//	PENDING ──inventory.reserved──▶ RESERVED ──payment.processed──▶ CONFIRMED
//	   │                               │
//	   ├─inventory.rejected────────────┼──▶ CANCELLED (out_of_stock)
//	   │                               ├─inventory.released──▶ CANCELLED (payment_declined, …)
//	   └─────────stuck too long────────┴──▶ CANCELLED (timeout)
package order

import (
	"fmt"
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
)

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
	case PaymentProcessed:
		return StatusConfirmed, true
	case InventoryRejected, InventoryReleased, TimedOut:
		return StatusCancelled, true
	}
	return s, false
}

// Limits of an order request.
const (
	MaxItems    = 100
	MaxQuantity = 10_000
	MaxPrice    = 100_000_000 // minor units
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
	idRE       = regexp.MustCompile(`^[A-Za-z0-9_.:\-]{1,64}$`)
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
	if a := r.ShippingAddress; a != nil {
		switch {
		case strings.TrimSpace(a.Line1) == "":
			return fieldErr("shipping_address.line1", "required")
		case strings.TrimSpace(a.City) == "":
			return fieldErr("shipping_address.city", "required")
		case strings.TrimSpace(a.PostalCode) == "":
			return fieldErr("shipping_address.postal_code", "required")
		case !countryRE.MatchString(a.Country):
			return fieldErr("shipping_address.country", "must be a two-letter upper-case ISO 3166 code such as DE")
		}
	}
	if r.PaymentMethod != "" && !idRE.MatchString(r.PaymentMethod) {
		return fieldErr("payment_method", "1-64 letters, digits or _.:-")
	}
	return nil
}

// Total is the order's amount in minor units. Validate's limits keep it
// far below overflow.
func (r *Request) Total() int64 {
	var t int64
	for _, it := range r.Items {
		t += it.Quantity * it.UnitPrice
	}
	return t
}
