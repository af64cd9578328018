package contract_test

import (
	"encoding/json"
	"io/fs"
	"reflect"
	"testing"

	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
)

// Decode reads data with a faster library than encoding/json; wherever
// encoding/json reads a payload, Decode must read the same values.
// Run longer with: go test -fuzz FuzzDecodeAgreesWithEncodingJSON ./contract/
func FuzzDecodeAgreesWithEncodingJSON(f *testing.F) {
	names, err := fs.Glob(schemas.MustDefault().Files(), "events/order.created/examples/*.json")
	if err != nil || len(names) == 0 {
		f.Fatalf("no examples: %v", err)
	}
	for _, name := range names {
		raw, _ := fs.ReadFile(schemas.MustDefault().Files(), name)
		env, err := schemas.DecodeEnvelope(raw)
		if err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(env.Data))
	}
	f.Add([]byte(`{"order_id":"o","ORDER_ID":"x","items":[{"sku":"a","quantity":1e0}],"total_amount":-0,"shipping_address":null}`))
	f.Add([]byte(`{"order_id":"\ud83d\ude00\u00e9","customer_id":"c","items":null,"currency":"EUR","total_amount":9007199254740993}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		agree[contract.OrderCreatedV3](t, data)
		agree[contract.InventoryReservedV2](t, data)
	})
}

func agree[T contract.Payload](t *testing.T, data []byte) {
	var want T
	if json.Unmarshal(data, &want) != nil {
		return // not a payload encoding/json reads; the catalog refuses it first
	}
	var zero T
	got, err := contract.Decode[T](schemas.Envelope{EventType: zero.EventType().String(), EventVersion: zero.EventVersion(), Data: data})
	if err != nil {
		t.Fatalf("encoding/json reads %s, Decode fails: %v", data, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\nDecode        %+v\nencoding/json %+v", data, got, want)
	}
}
