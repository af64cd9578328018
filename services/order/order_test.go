package order

import (
	"errors"
	"strings"
	"testing"
)

func TestNext(t *testing.T) {
	all := []Signal{InventoryReserved, InventoryRejected, InventoryReleased, PaymentProcessed, PaymentFailed, TimedOut}
	want := map[Status]map[Signal]Status{
		StatusPending: {InventoryReserved: StatusReserved, InventoryRejected: StatusCancelled,
			InventoryReleased: StatusCancelled, PaymentProcessed: StatusConfirmed, TimedOut: StatusCancelled},
		StatusReserved: {InventoryRejected: StatusCancelled, InventoryReleased: StatusCancelled,
			PaymentProcessed: StatusConfirmed, TimedOut: StatusCancelled},
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
