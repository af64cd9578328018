package schemas_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/concordhq/concord/schemas"
)

func TestInvalidPayloadsNameThePointerAndRule(t *testing.T) {
	data := func(m map[string]any) map[string]any { return m["data"].(map[string]any) }
	item := func(m map[string]any) map[string]any { return data(m)["items"].([]any)[0].(map[string]any) }
	cases := []struct {
		name        string
		mutate      func(m map[string]any)
		wantPointer string
		wantRule    string
	}{
		{"missing required field", func(m map[string]any) { delete(data(m), "customer_id") }, "/data", "required"},
		{"wrong type", func(m map[string]any) { data(m)["total_amount"] = "2500" }, "/data/total_amount", "type"},
		{"bad uuid", func(m map[string]any) { m["event_id"] = "not-a-uuid" }, "/event_id", "format"},
		{"negative quantity", func(m map[string]any) { item(m)["quantity"] = -1 }, "/data/items/0/quantity", "minimum"},
		{"bad currency", func(m map[string]any) { data(m)["currency"] = "euro" }, "/data/currency", "pattern"},
		{"unknown envelope field", func(m map[string]any) { m["surprise"] = 1 }, "", "additionalProperties"},
		{"bad shipping address", func(m map[string]any) { delete(data(m)["shipping_address"].(map[string]any), "city") }, "/data/shipping_address", "required"},
	}
	cat := schemas.MustDefault()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := orderCreatedV2(t)
			tc.mutate(m)
			b, _ := json.Marshal(m)
			err := cat.Validate(b)
			if err == nil {
				t.Fatal("invalid payload accepted")
			}
			var ve *schemas.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error %T %v is not a *ValidationError", err, err)
			}
			if ve.Pointer != tc.wantPointer || ve.Rule != tc.wantRule {
				t.Fatalf("got pointer %q rule %q (%v), want pointer %q rule %q", ve.Pointer, ve.Rule, err, tc.wantPointer, tc.wantRule)
			}
			if !strings.Contains(err.Error(), tc.wantRule) {
				t.Fatalf("message %q does not name the rule", err)
			}
		})
	}
}
