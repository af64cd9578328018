package idempotent

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/concordhq/concord/schemas"
)

// Reasons a record is dead-lettered; they go into the dead_letters.reason
// column and the DLQ record's HeaderDLQReason header.
const (
	ReasonDecode         = "decode"          // bytes that are not a JSON envelope, or a bad event_id
	ReasonSchema         = "schema"          // the payload breaks its schema
	ReasonUnknownType    = "unknown_type"    // event_type not in the catalog
	ReasonUnknownVersion = "unknown_version" // event_version the catalog does not know
	ReasonHandler        = "handler"         // the handler failed permanently
)

// permanentError marks an error that retrying cannot fix.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks a handler error as permanent: the record goes to the
// dead-letter topic and the partition goes on. Use it for errors that the
// same event would hit again on every retry (a business rule the event
// breaks), not for outages. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err, or an error it wraps, was marked Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

// Failure says what the runner does with an error.
type Failure int

const (
	// Transient failures roll the batch back and retry it with backoff; the
	// partition's offsets do not move.
	Transient Failure = iota
	// PermanentFailure sends the record to the dead-letter topic; the
	// partition goes on.
	PermanentFailure
)

func (f Failure) String() string {
	if f == PermanentFailure {
		return "permanent"
	}
	return "transient"
}

// Classify decides whether a handler error is permanent. Marked errors are;
// so are PostgreSQL data exceptions (SQLSTATE class 22) and integrity
// constraint violations (class 23), because the same event makes the same
// statement fail on every retry. Everything else — connection loss,
// serialization failures, deadlocks, timeouts, shutdowns, and errors the
// handler did not mark — is transient: when in doubt the runner retries
// rather than skips, and a stuck partition shows in the lag metric.
func Classify(err error) Failure {
	if err == nil {
		return Transient
	}
	if IsPermanent(err) {
		return PermanentFailure
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Transient
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		if strings.HasPrefix(pg.Code, "22") || strings.HasPrefix(pg.Code, "23") {
			return PermanentFailure
		}
	}
	return Transient
}

// decodeReason names the dead-letter reason of a record that failed
// decoding or validation.
func decodeReason(err error) string {
	var ve *schemas.ValidationError
	switch {
	case errors.Is(err, schemas.ErrUnknownType):
		return ReasonUnknownType
	case errors.Is(err, schemas.ErrUnknownVersion):
		return ReasonUnknownVersion
	case errors.As(err, &ve) && ve.Rule != "json":
		return ReasonSchema
	default:
		return ReasonDecode
	}
}
