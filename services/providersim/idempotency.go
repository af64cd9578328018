package providersim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// idempotent runs h at most once per (API key, Idempotency-Key), as Stripe
// does for POST requests. It is called with s.mu held, so two concurrent
// requests with one key cannot both execute: the second waits and replays.
//
//   - A key seen before with the same method, path and parameters replays the
//     first answer (status and body) without executing anything; replayed
//     reports this.
//   - The same key with other parameters is refused with 400
//     idempotency_error and changes nothing.
//   - Only answers from requests that executed are recorded (2xx, and 402
//     card declines). Validation errors are not, so a corrected request may
//     reuse the key, as on Stripe.
//   - Keys are forgotten IdempotencyTTL after first use.
func (s *Server) idempotent(r *request, h func(*request) response) (res response, replayed bool) {
	if r.idemKey == "" {
		return h(r), false
	}
	if len(r.idemKey) > 255 {
		return invalidRequest("", "Idempotency-Key", "Idempotency keys can be up to 255 characters long.").response(), false
	}
	k := r.apiKey + "\x00" + r.idemKey
	fp := fingerprint(r.method, r.path, url.Values(r.form))
	if rec, ok := s.st.Idempotency[k]; ok && r.now.Sub(rec.Created) < s.cfg.IdempotencyTTL {
		if rec.Fingerprint != fp {
			return (&apiError{Status: http.StatusBadRequest, Type: errTypeIdempotency,
				Message: fmt.Sprintf("Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '%s' if you meant to execute a different request.", r.idemKey)}).response(), false
		}
		return response{status: rec.Status, body: rec.Body}, true
	}
	res = h(r)
	if (res.status >= 200 && res.status < 300) || res.status == http.StatusPaymentRequired {
		s.st.Idempotency[k] = &idemRecord{Fingerprint: fp, Status: res.status, Body: res.body, Created: r.now}
		s.dirty = true
	}
	return res, false
}

// fingerprint identifies a request's endpoint and parameters; url.Values
// encodes with sorted keys, so parameter order does not matter.
func fingerprint(method, path string, form url.Values) string {
	sum := sha256.Sum256([]byte(method + " " + path + "?" + form.Encode()))
	return hex.EncodeToString(sum[:])
}

// expireIdempotency forgets keys older than the TTL. Called with s.mu held.
func (s *Server) expireIdempotency(now time.Time) {
	for k, rec := range s.st.Idempotency {
		if now.Sub(rec.Created) >= s.cfg.IdempotencyTTL {
			delete(s.st.Idempotency, k)
			s.dirty = true
		}
	}
}
