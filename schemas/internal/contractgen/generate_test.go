package main

import (
	"bytes"
	"os"
	"testing"

	"github.com/concordhq/concord/schemas"
)

// The checked-in contract is what the generator writes from today's
// schemas: a schema edited without `go generate` fails here and in make lint.
func TestGeneratedContractIsFresh(t *testing.T) {
	want, err := Generate(schemas.MustDefault())
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile("../../contract/contract_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		t.Fatal("schemas/contract/contract_gen.go is stale: run `go generate ./schemas/...`")
	}
}

func TestNames(t *testing.T) {
	for in, want := range map[string]string{
		"payment.apply_succeeded": "PaymentApplySucceeded",
		"order_id":                "OrderID",
		"provider_payment_id":     "ProviderPaymentID",
		"skus":                    "SKUs",
		"line1":                   "Line1",
	} {
		if got := camel(in); got != want {
			t.Errorf("camel(%q) = %q, want %q", in, got, want)
		}
	}
}
