// Package inventory is the inventory service's domain: reservations and the
// rules for moving them. Stock per SKU is split into available, reserved
// and committed; a reservation moves quantities between them and the total
// (the stock ever received) never changes except by receiving stock. It
// does no I/O; inventory/postgres applies these rules.
//
//	HELD ──payment.processed──▶ COMMITTED
//	 │                              │
//	 ├──payment.failed / order.cancelled──▶ RELEASED ◀──order.cancelled (refund)
//	 (no stock: REJECTED, nothing held)
package inventory

import (
	"fmt"
	"math"
	"sort"
)

// Status is a reservation's state.
type Status string

// Reservation statuses. REJECTED and RELEASED hold no stock.
const (
	StatusHeld      Status = "HELD"
	StatusCommitted Status = "COMMITTED"
	StatusReleased  Status = "RELEASED"
	StatusRejected  Status = "REJECTED"
)

// Action is what a saga event asks of a reservation.
type Action string

// Actions, named after what they do to stock.
const (
	Commit  Action = "commit"  // payment.processed: reserved → committed
	Release Action = "release" // payment.failed, order.cancelled: back to available
)

// Move is the stock movement a reservation's transition causes: from which
// bucket to which the reserved quantities go.
type Move struct {
	From, To string // "reserved", "committed", "available"
}

// Decide says where a reservation in status s goes on action a, and which
// stock movement that implies. ok is false when nothing happens: the
// action was already done (a duplicate), or comes too late (a payment for
// an order whose stock was already released), or there was never stock.
//
// A COMMITTED reservation is still released when its order is cancelled:
// that is the saga's compensation for a payment that succeeded after the
// order timed out, and the payment service refunds the money.
func Decide(s Status, a Action) (next Status, m Move, ok bool) {
	switch {
	case s == StatusHeld && a == Commit:
		return StatusCommitted, Move{"reserved", "committed"}, true
	case s == StatusHeld && a == Release:
		return StatusReleased, Move{"reserved", "available"}, true
	case s == StatusCommitted && a == Release:
		return StatusReleased, Move{"committed", "available"}, true
	}
	return s, Move{}, false
}

// Line is a quantity of one SKU.
type Line struct {
	SKU      string `json:"sku"`
	Quantity int64  `json:"quantity"`
}

// Normalize merges lines of the same SKU and sorts them by SKU. Every
// transaction that touches several SKUs locks them in this order, so two
// reservations can never wait on each other (no deadlock). Quantities
// whose sum leaves int64 are an error, never a wrapped negative.
func Normalize(lines []Line) ([]Line, error) {
	sum := make(map[string]int64, len(lines))
	for _, l := range lines {
		if l.SKU == "" || l.Quantity < 1 {
			return nil, fmt.Errorf("line %q × %d: need a SKU and a positive quantity", l.SKU, l.Quantity)
		}
		q, ok := addQuantity(sum[l.SKU], l.Quantity)
		if !ok {
			return nil, fmt.Errorf("the quantities of %q add up beyond %d", l.SKU, int64(math.MaxInt64))
		}
		sum[l.SKU] = q
	}
	out := make([]Line, 0, len(sum))
	for sku, q := range sum {
		out = append(out, Line{SKU: sku, Quantity: q})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SKU < out[j].SKU })
	return out, nil
}
