package kit

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// DefaultMaxBodyBytes bounds the body of every request the ops server
// accepts: 1 MiB, well above any order, stock receipt, webhook or provider
// form Concord sends, and small enough that a client cannot make a process
// buffer arbitrary amounts of memory. A handler may set a smaller bound of
// its own with http.MaxBytesReader.
const DefaultMaxBodyBytes int64 = 1 << 20

// LimitBody refuses request bodies larger than maxBytes. A request whose
// Content-Length already says it is too large gets 413 with a JSON error
// naming the limit, before the handler runs. A body of unknown length
// (chunked) is wrapped in http.MaxBytesReader, so a handler reading past the
// limit gets an *http.MaxBytesError, which it must answer with 413 (see
// WriteBodyTooLarge), and the connection is closed after the response.
func LimitBody(next http.Handler, maxBytes int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > maxBytes {
			WriteBodyTooLarge(w, maxBytes)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, maxBytes)
		}
		next.ServeHTTP(w, r)
	})
}

// WriteBodyTooLarge answers 413 with {"error": "body larger than N bytes"}.
func WriteBodyTooLarge(w http.ResponseWriter, maxBytes int64) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusRequestEntityTooLarge)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": fmt.Sprintf("body larger than %d bytes", maxBytes)})
}
