package idempotent

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/concordhq/concord/schemas"
)

func TestClassifyRetriesUnlessRetryingCannotHelp(t *testing.T) {
	pg := func(code string) error { return fmt.Errorf("insert: %w", &pgconn.PgError{Code: code}) }
	tests := []struct {
		name string
		err  error
		want Failure
	}{
		{"marked permanent", Permanent(errors.New("order rejected")), PermanentFailure},
		{"marked permanent, wrapped again", fmt.Errorf("apply: %w", Permanent(errors.New("x"))), PermanentFailure},
		{"unmarked handler error", errors.New("provider timeout"), Transient},
		{"unique violation 23505", pg("23505"), PermanentFailure},
		{"check violation 23514", pg("23514"), PermanentFailure},
		{"invalid text representation 22P02", pg("22P02"), PermanentFailure},
		{"serialization failure 40001", pg("40001"), Transient},
		{"deadlock 40P01", pg("40P01"), Transient},
		{"admin shutdown 57P01", pg("57P01"), Transient},
		{"too many connections 53300", pg("53300"), Transient},
		{"aborted transaction 25P02", pg("25P02"), Transient},
		{"undefined table 42P01 (a bug: wait for the fix)", pg("42P01"), Transient},
		{"context cancelled", context.Canceled, Transient},
		{"deadline", fmt.Errorf("exec: %w", context.DeadlineExceeded), Transient},
		{"nil", nil, Transient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.err); got != tt.want {
				t.Fatalf("Classify(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
	if Permanent(nil) != nil {
		t.Fatal("Permanent(nil) != nil")
	}
}

func TestDecodeReasonNamesTheFailure(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&schemas.ValidationError{Rule: "json"}, ReasonDecode},
		{&schemas.ValidationError{EventType: "order.created", Rule: "required"}, ReasonSchema},
		{fmt.Errorf("%w: x.y", schemas.ErrUnknownType), ReasonUnknownType},
		{fmt.Errorf("%w: order.created v9", schemas.ErrUnknownVersion), ReasonUnknownVersion},
		{errors.New("decode envelope: EOF"), ReasonDecode},
	}
	for _, tt := range tests {
		if got := decodeReason(tt.err); got != tt.want {
			t.Errorf("decodeReason(%v) = %s, want %s", tt.err, got, tt.want)
		}
	}
}
