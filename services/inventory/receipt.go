package inventory

import (
	"fmt"
	"math"
	"unicode"
	"unicode/utf8"
)

// Limits of a stock receipt (POST /admin/stock). A SKU is 1 to MaxSKULen
// bytes of valid UTF-8 without control characters (PostgreSQL text refuses
// NUL); a line receives 1 to MaxReceiveQuantity units, so no receipt can
// push a stock bucket near the int64 limit.
const (
	MaxSKULen          = 64
	MaxReceiveQuantity = 1_000_000_000
	MaxReceiptLines    = 1_000
)

// FieldError names the field of a receipt that is wrong and why.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// CheckReceipt returns the first problem of a stock receipt as a
// *FieldError, or nil.
func CheckReceipt(lines []Line) error {
	switch {
	case len(lines) == 0:
		return &FieldError{"items", "at least one line is required"}
	case len(lines) > MaxReceiptLines:
		return &FieldError{"items", fmt.Sprintf("at most %d lines", MaxReceiptLines)}
	}
	for i, l := range lines {
		f := fmt.Sprintf("items[%d]", i)
		switch {
		case l.SKU == "" || len(l.SKU) > MaxSKULen:
			return &FieldError{f + ".sku", fmt.Sprintf("required: 1-%d bytes", MaxSKULen)}
		case !utf8.ValidString(l.SKU) || containsControl(l.SKU):
			return &FieldError{f + ".sku", "must be valid UTF-8 without NUL or control characters"}
		case l.Quantity < 1 || l.Quantity > MaxReceiveQuantity:
			return &FieldError{f + ".quantity", fmt.Sprintf("must be between 1 and %d", MaxReceiveQuantity)}
		}
	}
	if _, err := Normalize(lines); err != nil {
		return &FieldError{"items", err.Error()}
	}
	return nil
}

func containsControl(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) {
			return true
		}
	}
	return false
}

// addQuantity adds two non-negative quantities, false when the sum leaves
// int64.
func addQuantity(a, b int64) (int64, bool) {
	if b > math.MaxInt64-a {
		return 0, false
	}
	return a + b, true
}
