package order

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"
)

// FuzzOrderRequestThatValidatesIsStorable decodes an API body as the order
// API does, validates it and totals it. Nothing may panic; a refusal is a
// *FieldError naming a field; a request that validates has an exact total
// within int64 and strings PostgreSQL stores (no NUL) within their limits.
func FuzzOrderRequestThatValidatesIsStorable(f *testing.F) {
	for _, s := range []string{
		`{"customer_id":"cus_1","currency":"EUR","items":[{"sku":"SKU-1","quantity":2,"unit_price":1250}]}`,
		`{"customer_id":"c","currency":"EUR","items":[{"sku":"A","quantity":10000,"unit_price":100000000}],"payment_method":"pm_card_visa",` +
			`"shipping_address":{"line1":"Hauptstr. 1","line2":"Hof","city":"Berlin","postal_code":"10115","country":"DE"}}`,
		`{"customer_id":"c","currency":"EUR","items":[{"sku":"A","quantity":9223372036854775807,"unit_price":9223372036854775807}]}`,
		`{"customer_id":"c","currency":"EUR","items":[{"sku":"A","quantity":1,"unit_price":1}],"shipping_address":{"line1":"a\u0000","city":"b","postal_code":"1","country":"DE"}}`,
		`{"customer_id":"c\u0000","currency":"EUR","items":[]}`,
		`{"items":null,"shipping_address":null}`,
		`[]`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		var r Request
		if dec.Decode(&r) != nil {
			return
		}
		total := r.Total()
		err := r.Validate()
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field == "" {
				t.Fatalf("Validate = %v; want a *FieldError naming a field", err)
			}
			return
		}
		exact := new(big.Int)
		for _, it := range r.Items {
			exact.Add(exact, new(big.Int).Mul(big.NewInt(it.Quantity), big.NewInt(it.UnitPrice)))
		}
		if !exact.IsInt64() || exact.Int64() != total || total < 0 {
			t.Fatalf("valid request totals %d; exact total %s", total, exact)
		}
		type field struct {
			name, value string
			max         int
		}
		fields := []field{{"customer_id", r.CustomerID, MaxIDLen}, {"currency", r.Currency, 3}, {"payment_method", r.PaymentMethod, MaxIDLen}}
		for _, it := range r.Items {
			fields = append(fields, field{"sku", it.SKU, MaxIDLen})
		}
		if a := r.ShippingAddress; a != nil {
			fields = append(fields, field{"line1", a.Line1, MaxAddressLineLen}, field{"line2", a.Line2, MaxAddressLineLen},
				field{"city", a.City, MaxCityLen}, field{"postal_code", a.PostalCode, MaxPostalCodeLen}, field{"country", a.Country, 2})
		}
		for _, fd := range fields {
			if strings.ContainsRune(fd.value, 0) {
				t.Fatalf("valid request has a NUL in %s: %q", fd.name, fd.value)
			}
			if len(fd.value) > fd.max {
				t.Fatalf("valid request has %d bytes in %s; limit %d", len(fd.value), fd.name, fd.max)
			}
		}
	})
}
