package schemas_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"path"
	"testing"

	"github.com/concordhq/concord/schemas"
)

func TestEveryExampleValidates(t *testing.T) {
	cat := schemas.MustDefault()
	n := 0
	for _, typ := range cat.Types() {
		matches, err := fs.Glob(cat.Files(), path.Join("events", typ, "examples", "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		if len(matches) == 0 {
			t.Errorf("%s has no examples", typ)
		}
		for _, m := range matches {
			b, err := fs.ReadFile(cat.Files(), m)
			if err != nil {
				t.Fatal(err)
			}
			if err := cat.Validate(b); err != nil {
				t.Errorf("%s: %v", m, err)
			}
			n++
		}
	}
	if n < 9 {
		t.Fatalf("validated %d examples, want at least 9 (one per saga event schema)", n)
	}
}

func TestSagaEventTypesAreInTheCatalog(t *testing.T) {
	cat := schemas.MustDefault()
	want := map[string][]int{
		"order.created": {1, 2, 3}, "inventory.reserved": {1, 2}, "inventory.rejected": {1},
		"inventory.released": {1}, "payment.processed": {1}, "payment.failed": {1},
		"order.confirmed": {1}, "order.cancelled": {1},
		"payment.authorize_hold": {1}, "payment.capture_hold": {1}, "payment.cancel_hold": {1},
		"inventory.reserve_stock": {1}, "inventory.release_stock": {1},
		"shipping.create_shipment": {1}, "shipping.cancel_shipment": {1},
		"saga.step_replied": {1}, "saga.checkout_requested": {1}, "saga.finished": {1},
	}
	for typ, versions := range want {
		e, err := cat.Lookup(typ)
		if err != nil {
			t.Errorf("%s: %v", typ, err)
			continue
		}
		if len(e.Versions) != len(versions) || e.Latest() != versions[len(versions)-1] {
			t.Errorf("%s versions = %v, want %v", typ, e.Versions, versions)
		}
		if e.Topic == "" || e.KeyField == "" {
			t.Errorf("%s: topic %q key field %q", typ, e.Topic, e.KeyField)
		}
	}
}

// orderCreatedV2 is a valid order.created v2 event; the cases below each
// break one rule of it.
func orderCreatedV2(t *testing.T) map[string]any {
	t.Helper()
	b, err := fs.ReadFile(schemas.MustDefault().Files(), "events/order.created/examples/v2-basic.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestWrongConstVersionIsRejected(t *testing.T) {
	cat := schemas.MustDefault()
	m := orderCreatedV2(t)
	b, _ := json.Marshal(m)
	var ve *schemas.ValidationError
	if err := cat.ValidateAs("order.created", 1, b); !errors.As(err, &ve) || ve.Pointer != "/event_version" || ve.Rule != "const" {
		t.Fatalf("v2 event against the v1 schema: got %v, want /event_version const", err)
	}
	m = orderCreatedV2(t)
	m["event_version"] = 7
	b, _ = json.Marshal(m)
	if err := cat.Validate(b); !errors.Is(err, schemas.ErrUnknownVersion) {
		t.Fatalf("got %v, want ErrUnknownVersion", err)
	}
	m["event_type"] = "order.teleported"
	b, _ = json.Marshal(m)
	if err := cat.Validate(b); !errors.Is(err, schemas.ErrUnknownType) {
		t.Fatalf("got %v, want ErrUnknownType", err)
	}
}

func TestPartitionKeyComesFromTheCatalogKeyField(t *testing.T) {
	e, _ := schemas.MustDefault().Lookup("order.created")
	k, err := e.PartitionKey(json.RawMessage(`{"order_id":"o-1"}`))
	if err != nil || k != "o-1" {
		t.Fatalf("key %q err %v", k, err)
	}
	if _, err := e.PartitionKey(json.RawMessage(`{"customer_id":"c"}`)); err == nil {
		t.Fatal("missing key field accepted")
	}
}
