package contract_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"path"
	"reflect"
	"testing"

	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
)

// readers maps a (type, version) to a function decoding an envelope into
// that version's struct: the table every generated payload must appear in.
var readers = map[string]func(schemas.Envelope) (contract.Payload, error){
	"account.credit_reversed/1":     read[contract.AccountCreditReversedV1],
	"account.credited/1":            read[contract.AccountCreditedV1],
	"account.debit_reversed/1":      read[contract.AccountDebitReversedV1],
	"account.debited/1":             read[contract.AccountDebitedV1],
	"funding.apply_broker_status/1": read[contract.FundingApplyBrokerStatusV1],
	"inventory.rejected/1":          read[contract.InventoryRejectedV1],
	"inventory.release_stock/1":     read[contract.InventoryReleaseStockV1],
	"inventory.reserve_stock/1":     read[contract.InventoryReserveStockV1],
	"inventory.released/1":          read[contract.InventoryReleasedV1],
	"inventory.reserved/1":          read[contract.InventoryReservedV1],
	"inventory.reserved/2":          read[contract.InventoryReservedV2],
	"order.cancelled/1":             read[contract.OrderCancelledV1],
	"order.confirmed/1":             read[contract.OrderConfirmedV1],
	"order.created/1":               read[contract.OrderCreatedV1],
	"order.created/2":               read[contract.OrderCreatedV2],
	"order.created/3":               read[contract.OrderCreatedV3],
	"payment.apply_canceled/1":      read[contract.PaymentApplyCanceledV1],
	"payment.apply_succeeded/1":     read[contract.PaymentApplySucceededV1],
	"payment.authorize_hold/1":      read[contract.PaymentAuthorizeHoldV1],
	"payment.cancel_hold/1":         read[contract.PaymentCancelHoldV1],
	"payment.capture_hold/1":        read[contract.PaymentCaptureHoldV1],
	"payment.failed/1":              read[contract.PaymentFailedV1],
	"payment.processed/1":           read[contract.PaymentProcessedV1],
	"payment.refunded/1":            read[contract.PaymentRefundedV1],
	"saga.checkout_requested/1":     read[contract.SagaCheckoutRequestedV1],
	"saga.finished/1":               read[contract.SagaFinishedV1],
	"saga.step_replied/1":           read[contract.SagaStepRepliedV1],
	"shipping.cancel_shipment/1":    read[contract.ShippingCancelShipmentV1],
	"shipping.create_shipment/1":    read[contract.ShippingCreateShipmentV1],
}

func read[T contract.Payload](env schemas.Envelope) (contract.Payload, error) {
	return contract.Decode[T](env)
}

// Every example payload decodes into its generated struct, and the struct
// encodes back to data that is valid and means the same: the generated
// types hold everything the schemas declare, with the same names and kinds.
func TestExamplesRoundTripThroughGeneratedTypes(t *testing.T) {
	cat := schemas.MustDefault()
	seen := map[string]bool{}
	for _, typ := range cat.Types() {
		dir := path.Join("events", typ, "examples")
		files, err := fs.ReadDir(cat.Files(), dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			raw, err := fs.ReadFile(cat.Files(), path.Join(dir, f.Name()))
			if err != nil {
				t.Fatal(err)
			}
			env, err := schemas.DecodeEnvelope(raw)
			if err != nil {
				t.Fatal(err)
			}
			key := env.EventType + "/" + itoa(env.EventVersion)
			readFn, ok := readers[key]
			if !ok {
				t.Fatalf("%s: no generated payload for %s", f.Name(), key)
			}
			seen[key] = true
			p, err := readFn(env)
			if err != nil {
				t.Fatalf("%s %s: %v", typ, f.Name(), err)
			}
			// Decode's library must read what encoding/json reads.
			std := reflect.New(reflect.TypeOf(p))
			if err := json.Unmarshal(env.Data, std.Interface()); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(std.Elem().Interface(), p) {
				t.Errorf("%s %s: Decode gave %+v, encoding/json %+v", typ, f.Name(), p, std.Elem().Interface())
			}
			if p.EventType().String() != typ || p.EventVersion() != env.EventVersion {
				t.Fatalf("%s: payload says %s v%d", f.Name(), p.EventType(), p.EventVersion())
			}
			data, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			var want, got any
			_ = json.Unmarshal(env.Data, &want)
			_ = json.Unmarshal(data, &got)
			if !reflect.DeepEqual(stripEmpty(want), got) {
				t.Errorf("%s %s: data changed through the struct:\n in: %s\nout: %s", typ, f.Name(), env.Data, data)
			}
			env.Data = data
			b, _ := env.Marshal()
			if err := cat.ValidateAs(typ, env.EventVersion, b); err != nil {
				t.Errorf("%s %s: re-encoded event is invalid: %v", typ, f.Name(), err)
			}
		}
	}
	for _, typ := range cat.Types() {
		e, _ := cat.Lookup(typ)
		for _, v := range e.Versions {
			if _, ok := readers[typ+"/"+itoa(v)]; !ok {
				t.Errorf("%s v%d has no generated payload in the readers table", typ, v)
			}
		}
	}
}

// stripEmpty drops empty strings and arrays of optional fields the way
// omitempty does; examples spell some of them out.
func stripEmpty(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && s == "" {
				delete(x, k)
				continue
			}
			x[k] = stripEmpty(e)
		}
	case []any:
		for i := range x {
			x[i] = stripEmpty(x[i])
		}
	}
	return v
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestTypesCarryTheCatalogsRouting(t *testing.T) {
	cat := schemas.MustDefault()
	if len(contract.Types) != len(cat.Types()) {
		t.Fatalf("generated %d types, catalog has %d", len(contract.Types), len(cat.Types()))
	}
	for _, typ := range contract.Types {
		e, err := cat.Lookup(typ.String())
		if err != nil {
			t.Fatal(err)
		}
		if typ.Topic() != e.Topic || typ.AggregateType() != e.AggregateType || typ.Latest() != e.Latest() {
			t.Errorf("%s: generated topic %q aggregate %q latest %d; catalog %q %q %d",
				typ, typ.Topic(), typ.AggregateType(), typ.Latest(), e.Topic, e.AggregateType, e.Latest())
		}
	}
	if contract.Type("order.shipped").Known() {
		t.Error("an unknown type says it is known")
	}
}

func envelope(typ string, v int, data string) schemas.Envelope {
	return schemas.Envelope{EventID: "e1", EventType: typ, EventVersion: v, Data: json.RawMessage(data)}
}

const orderV1 = `{"order_id":"0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d01","customer_id":"c","items":[{"sku":"S","quantity":1,"unit_price":5}],"total_amount":5,"currency":"EUR"}`
const orderV2 = `{"order_id":"0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d01","customer_id":"c","items":[{"sku":"S","quantity":1,"unit_price":5}],"total_amount":5,"currency":"EUR","shipping_address":{"line1":"1 Rue","city":"Paris","postal_code":"75001","country":"FR"}}`

// A v1 reader and a v2 reader of order.created both work: each reads its
// own version, the v2 reader also reads v1 (BACKWARD: new reads old), and
// a v1 reader is told plainly that it cannot read v2.
func TestDecodeReadsTheVersionsItsCompatibilityAllows(t *testing.T) {
	v1, err := contract.Decode[contract.OrderCreatedV1](envelope("order.created", 1, orderV1))
	if err != nil || v1.TotalAmount != 5 || v1.Items[0].SKU != "S" {
		t.Fatalf("v1 reader of v1: %+v, %v", v1, err)
	}
	v2, err := contract.Decode[contract.OrderCreatedV2](envelope("order.created", 2, orderV2))
	if err != nil || v2.ShippingAddress == nil || v2.ShippingAddress.City != "Paris" {
		t.Fatalf("v2 reader of v2: %+v, %v", v2, err)
	}
	old, err := contract.Decode[contract.OrderCreatedV2](envelope("order.created", 1, orderV1))
	if err != nil || old.ShippingAddress != nil || old.CustomerID != "c" {
		t.Fatalf("v2 reader of v1: %+v, %v", old, err)
	}
	if _, err := contract.Decode[contract.OrderCreatedV1](envelope("order.created", 2, orderV2)); !errors.Is(err, contract.ErrMismatch) {
		t.Fatalf("v1 reader of v2: want ErrMismatch, got %v", err)
	}
	if _, err := contract.Decode[contract.OrderCancelledV1](envelope("order.created", 1, orderV1)); !errors.Is(err, contract.ErrMismatch) {
		t.Fatalf("order.cancelled reader of order.created: want ErrMismatch, got %v", err)
	}
}

func TestCanReadFollowsTheCompatibilityMode(t *testing.T) {
	cases := []struct {
		typ             contract.Type
		reader, written int
		want            bool
	}{
		{contract.TypeInventoryReserved, 2, 1, true},  // BACKWARD: new reads previous
		{contract.TypeInventoryReserved, 1, 2, false}, // BACKWARD says nothing of old reading new
		{contract.TypeInventoryReserved, 3, 1, false}, // BACKWARD is not transitive
		{contract.TypeOrderCreated, 3, 1, true},       // BACKWARD_TRANSITIVE: new reads every earlier
		{contract.TypeOrderCreated, 1, 2, false},
		{contract.TypeOrderCreated, 1, 1, true},   // same version always
		{contract.TypeAccountDebited, 1, 3, true}, // FULL_TRANSITIVE: any
		{contract.TypeAccountDebited, 5, 1, true},
		{contract.Type("nope"), 2, 1, false},
	}
	for _, c := range cases {
		if got := contract.CanRead(c.typ, c.reader, c.written); got != c.want {
			t.Errorf("CanRead(%s, reader v%d, written v%d) = %v, want %v", c.typ, c.reader, c.written, got, c.want)
		}
	}
}
