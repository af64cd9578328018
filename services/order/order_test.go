package order

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestNext(t *testing.T) {
	all := []Signal{InventoryReserved, InventoryRejected, InventoryReleased, PaymentProcessed, PaymentFailed, TimedOut,
		SagaCompleted, SagaCompensated, SagaFailed}
	want := map[Status]map[Signal]Status{
		StatusPending: {InventoryReserved: StatusReserved, InventoryRejected: StatusCancelled,
			InventoryReleased: StatusCancelled, PaymentProcessed: StatusConfirmed, TimedOut: StatusCancelled,
			SagaCompleted: StatusConfirmed, SagaCompensated: StatusCancelled, SagaFailed: StatusCancelled},
		StatusReserved: {InventoryRejected: StatusCancelled, InventoryReleased: StatusCancelled,
			PaymentProcessed: StatusConfirmed, TimedOut: StatusCancelled,
			SagaCompleted: StatusConfirmed, SagaCompensated: StatusCancelled, SagaFailed: StatusCancelled},
		StatusConfirmed: {},
		StatusCancelled: {},
	}
	for from, row := range want {
		for _, sig := range all {
			to, changed := Next(from, sig)
			exp, ok := row[sig]
			if !ok {
				exp = from
			}
			if to != exp || changed != ok {
				t.Errorf("Next(%s, %s) = %s, %v; want %s, %v", from, sig, to, changed, exp, ok)
			}
		}
	}
}

func valid() Request {
	return Request{CustomerID: "cus_1", Currency: "EUR", Items: []Item{{SKU: "SKU-1", Quantity: 2, UnitPrice: 1250}},
		ShippingAddress: &Address{Line1: "Hauptstr. 1", City: "Berlin", PostalCode: "10115", Country: "DE"}}
}

func TestValidateNamesTheField(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*Request)
		field string
	}{
		{"ok", func(*Request) {}, ""},
		{"no customer", func(r *Request) { r.CustomerID = "" }, "customer_id"},
		{"lower-case currency", func(r *Request) { r.Currency = "eur" }, "currency"},
		{"no items", func(r *Request) { r.Items = nil }, "items"},
		{"too many items", func(r *Request) { r.Items = make([]Item, MaxItems+1) }, "items"},
		{"most items", func(r *Request) {
			for len(r.Items) < MaxItems {
				r.Items = append(r.Items, r.Items[0])
			}
		}, ""},
		{"empty sku", func(r *Request) { r.Items[0].SKU = "" }, "items[0].sku"},
		{"zero quantity", func(r *Request) { r.Items[0].Quantity = 0 }, "items[0].quantity"},
		{"negative quantity", func(r *Request) { r.Items[0].Quantity = -3 }, "items[0].quantity"},
		{"huge quantity", func(r *Request) { r.Items[0].Quantity = MaxQuantity + 1 }, "items[0].quantity"},
		{"one of an item", func(r *Request) { r.Items[0].Quantity = 1 }, ""},
		{"largest quantity", func(r *Request) { r.Items[0].Quantity = MaxQuantity }, ""},
		{"negative price", func(r *Request) { r.Items[0].UnitPrice = -1 }, "items[0].unit_price"},
		{"second item", func(r *Request) { r.Items = append(r.Items, Item{SKU: "X", Quantity: 0}) }, "items[1].quantity"},
		{"free item", func(r *Request) { r.Items[0].UnitPrice = 0 }, ""},
		{"highest price", func(r *Request) { r.Items[0].UnitPrice = MaxPrice }, ""},
		{"price too high", func(r *Request) { r.Items[0].UnitPrice = MaxPrice + 1 }, "items[0].unit_price"},
		{"no address", func(r *Request) { r.ShippingAddress = nil }, ""},
		{"address without city", func(r *Request) { r.ShippingAddress.City = " " }, "shipping_address.city"},
		{"bad country", func(r *Request) { r.ShippingAddress.Country = "Germany" }, "shipping_address.country"},
		{"bad payment method", func(r *Request) { r.PaymentMethod = "pm card" }, "payment_method"},
		{"orchestrated", func(r *Request) { r.Flow = FlowOrchestrated }, ""},
		{"choreographed", func(r *Request) { r.Flow = FlowChoreographed }, ""},
		{"unknown flow", func(r *Request) { r.Flow = "telepathic" }, "flow"},
		{"orchestrated without address", func(r *Request) { r.Flow, r.ShippingAddress = FlowOrchestrated, nil }, "shipping_address"},
		{"orchestrated and free", func(r *Request) { r.Flow, r.Items[0].UnitPrice = FlowOrchestrated, 0 }, "items"},
		{"orchestrated, one cent", func(r *Request) { r.Flow, r.Items[0].UnitPrice, r.Items[0].Quantity = FlowOrchestrated, 1, 1 }, ""},
		{"NUL in customer", func(r *Request) { r.CustomerID = "cus\x00" }, "customer_id"},
		{"NUL in sku", func(r *Request) { r.Items[0].SKU = "SKU\x001" }, "items[0].sku"},
		{"NUL in payment method", func(r *Request) { r.PaymentMethod = "pm\x00" }, "payment_method"},
		{"NUL in line1", func(r *Request) { r.ShippingAddress.Line1 = "Main St\x00" }, "shipping_address.line1"},
		{"NUL in line2", func(r *Request) { r.ShippingAddress.Line2 = "\x00" }, "shipping_address.line2"},
		{"NUL in city", func(r *Request) { r.ShippingAddress.City = "Ber\x00lin" }, "shipping_address.city"},
		{"NUL in postal code", func(r *Request) { r.ShippingAddress.PostalCode = "\x0010115" }, "shipping_address.postal_code"},
		{"longest customer", func(r *Request) { r.CustomerID = strings.Repeat("c", MaxIDLen) }, ""},
		{"customer too long", func(r *Request) { r.CustomerID = strings.Repeat("c", MaxIDLen+1) }, "customer_id"},
		{"sku too long", func(r *Request) { r.Items[0].SKU = strings.Repeat("S", MaxIDLen+1) }, "items[0].sku"},
		{"payment method too long", func(r *Request) { r.PaymentMethod = strings.Repeat("p", MaxIDLen+1) }, "payment_method"},
		{"currency too long", func(r *Request) { r.Currency = "EURO" }, "currency"},
		{"longest line1", func(r *Request) { r.ShippingAddress.Line1 = strings.Repeat("a", MaxAddressLineLen) }, ""},
		{"line1 too long", func(r *Request) { r.ShippingAddress.Line1 = strings.Repeat("a", MaxAddressLineLen+1) }, "shipping_address.line1"},
		{"line2 too long", func(r *Request) { r.ShippingAddress.Line2 = strings.Repeat("a", MaxAddressLineLen+1) }, "shipping_address.line2"},
		{"city too long", func(r *Request) { r.ShippingAddress.City = strings.Repeat("a", MaxCityLen+1) }, "shipping_address.city"},
		{"postal code too long", func(r *Request) { r.ShippingAddress.PostalCode = strings.Repeat("1", MaxPostalCodeLen+1) }, "shipping_address.postal_code"},
	}
	for _, c := range cases {
		r := valid()
		c.edit(&r)
		err := r.Validate()
		var fe *FieldError
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s: unexpected error %v", c.name, err)
		case c.field != "" && (!errors.As(err, &fe) || fe.Field != c.field):
			t.Errorf("%s: err = %v; want a FieldError on %s", c.name, err, c.field)
		case c.field != "" && !strings.HasPrefix(err.Error(), c.field+": "):
			t.Errorf("%s: message %q does not start with the field", c.name, err)
		}
	}
}

func TestTotal(t *testing.T) {
	r := Request{Items: []Item{{Quantity: 2, UnitPrice: 1250}, {Quantity: 1, UnitPrice: 99}}}
	if got := r.Total(); got != 2599 {
		t.Fatalf("Total = %d; want 2599", got)
	}
}

// TestTotalNeverOverflows: a product or sum beyond int64 is reported, not
// wrapped into a small or negative amount.
func TestTotalNeverOverflows(t *testing.T) {
	cases := []struct {
		name  string
		items []Item
		want  int64
		ok    bool
	}{
		{"largest valid order", repeat(Item{Quantity: MaxQuantity, UnitPrice: MaxPrice}, MaxItems), MaxItems * MaxQuantity * MaxPrice, true},
		{"product is exactly MaxInt64", []Item{{Quantity: 1, UnitPrice: math.MaxInt64}}, math.MaxInt64, true},
		{"product overflows", []Item{{Quantity: 2, UnitPrice: math.MaxInt64/2 + 1}}, math.MaxInt64, false},
		{"product overflows uint64", []Item{{Quantity: math.MaxInt64, UnitPrice: math.MaxInt64}}, math.MaxInt64, false},
		{"sum overflows", []Item{{Quantity: 1, UnitPrice: math.MaxInt64}, {Quantity: 1, UnitPrice: 1}}, math.MaxInt64, false},
		{"negative factors", []Item{{Quantity: -1, UnitPrice: -1}}, math.MaxInt64, false},
		{"zero factors add nothing", []Item{{Quantity: 0, UnitPrice: 5}, {Quantity: 3, UnitPrice: 0}, {Quantity: 2, UnitPrice: 7}}, 14, true},
	}
	for _, c := range cases {
		r := Request{Items: c.items}
		got, ok := r.total()
		if got != c.want || ok != c.ok {
			t.Errorf("%s: total() = %d, %v; want %d, %v", c.name, got, ok, c.want, c.ok)
		}
		if r.Total() != c.want {
			t.Errorf("%s: Total() = %d; want %d", c.name, r.Total(), c.want)
		}
	}
}

func repeat(it Item, n int) []Item {
	out := make([]Item, n)
	for i := range out {
		out[i] = it
	}
	return out
}
