package inventory

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestCheckReceiptNamesTheField(t *testing.T) {
	cases := []struct {
		name  string
		lines []Line
		field string
	}{
		{"ok", []Line{{"A", 1}, {"B", MaxReceiveQuantity}}, ""},
		{"none", nil, "items"},
		{"too many", make([]Line, MaxReceiptLines+1), "items"},
		{"empty sku", []Line{{"A", 1}, {"", 1}}, "items[1].sku"},
		{"longest sku", []Line{{strings.Repeat("s", MaxSKULen), 1}}, ""},
		{"sku too long", []Line{{strings.Repeat("s", MaxSKULen+1), 1}}, "items[0].sku"},
		{"NUL in sku", []Line{{"A\x00", 1}}, "items[0].sku"},
		{"invalid UTF-8 sku", []Line{{"A\xff", 1}}, "items[0].sku"},
		{"zero quantity", []Line{{"A", 0}}, "items[0].quantity"},
		{"quantity too large", []Line{{"A", MaxReceiveQuantity + 1}}, "items[0].quantity"},
	}
	for _, c := range cases {
		err := CheckReceipt(c.lines)
		var fe *FieldError
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s: unexpected error %v", c.name, err)
		case c.field != "" && (!errors.As(err, &fe) || fe.Field != c.field):
			t.Errorf("%s: err = %v; want a FieldError on %s", c.name, err, c.field)
		}
	}
}

// TestNormalizeRefusesASumBeyondInt64 rather than wrapping it negative.
func TestNormalizeRefusesASumBeyondInt64(t *testing.T) {
	if _, err := Normalize([]Line{{"A", math.MaxInt64}, {"A", 1}}); err == nil {
		t.Fatal("MaxInt64 + 1 of one SKU accepted")
	}
	got, err := Normalize([]Line{{"A", math.MaxInt64 - 1}, {"A", 1}})
	if err != nil || got[0].Quantity != math.MaxInt64 {
		t.Fatalf("Normalize = %v, %v; want MaxInt64 of A", got, err)
	}
}
