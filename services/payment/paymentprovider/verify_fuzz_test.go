package paymentprovider_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v84/webhook"

	"github.com/concordhq/concord/services/payment/paymentprovider"
	"github.com/concordhq/concord/services/providersim"
)

// fuzzSecret signs the fuzzed deliveries (and the checked-in corpus).
const fuzzSecret = "whsec_fuzz"

// FuzzVerifyAcceptsOnlyAFreshValidSignature fuzzes a delivery's body and
// its Stripe-Signature header. The header is a template: "{t}" becomes the
// Unix time now+skew seconds and "{v1}" the HMAC-SHA256 of "<that
// time>.<body>" under fuzzSecret, so the fuzzer can rearrange, repeat and
// damage the parts of a header that carries a valid signature.
//
// Verify must never panic. When it accepts, the header must hold a t=T and
// a v1 that is the HMAC of "T.body" under the secret (computed here with
// crypto/hmac, not with stripe-go), with T within WebhookTolerance of our
// clock, before or after. When the header is exactly "t=T,v1=<that HMAC>"
// with T fresh, Verify may still refuse the body, but not its signature.
func FuzzVerifyAcceptsOnlyAFreshValidSignature(f *testing.F) {
	body := []byte(`{"id":"evt_1","object":"event","api_version":"` + providersim.DefaultAPIVersion +
		`","type":"payment_intent.succeeded","created":1,"data":{"object":{"id":"pi_1","object":"payment_intent","status":"succeeded","amount":100}}}`)
	tol := int64(paymentprovider.WebhookTolerance / time.Second)
	for _, s := range []struct {
		header string
		skew   int64
	}{
		{"t={t},v1={v1}", 0},
		{"t={t},v1={v1}", -tol + 5},
		{"t={t},v1={v1}", -tol - 5},
		{"t={t},v1={v1}", -86400},
		{"t={t},v1={v1}", 60},
		{"t={t},v1={v1}", tol - 5},
		{"t={t},v1={v1}", tol + 5},
		{"t={t},v1={v1}", 86400},
		{"v1={v1},t={t}", 0},
		{"t={t},v1=00,v1={v1},v0=ab", 0},
		{"t={t},v1={v1},t=1", 0},
		{"t=1,t={t},v1={v1}", 0},
		{"t={t},v1=" + strings.Repeat("0", 64), 0},
		{"t={t},v1={v1}x", 0},
		{"t={t}", 0},
		{"v1={v1}", 0},
		{"t=,v1={v1}", 0},
		{"t={t},v1={v1},", 0},
		{"t={t}=,v1={v1}", 0},
		{"", 0},
	} {
		f.Add(body, s.header, s.skew)
	}
	f.Add([]byte(`{}`), "t={t},v1={v1}", int64(0))
	f.Add([]byte(`not json`), "t={t},v1={v1}", int64(0))
	f.Fuzz(func(t *testing.T, body []byte, template string, skew int64) {
		before := time.Now()
		ts := strconv.FormatInt(before.Unix()+skew, 10)
		header := strings.ReplaceAll(template, "{t}", ts)
		header = strings.ReplaceAll(header, "{v1}", sign(ts, body))

		_, err := paymentprovider.Verify(body, header, fuzzSecret)
		if err != nil {
			if !errors.Is(err, paymentprovider.ErrBadSignature) {
				t.Fatalf("Verify refused %q with %v, which does not wrap ErrBadSignature", header, err)
			}
			if header == "t="+ts+",v1="+sign(ts, body) && skew >= -tol+2 && skew <= tol-2 &&
				(errors.Is(err, webhook.ErrNoValidSignature) || errors.Is(err, webhook.ErrTooOld) || errors.Is(err, paymentprovider.ErrSignedInTheFuture) ||
					errors.Is(err, webhook.ErrInvalidHeader) || errors.Is(err, webhook.ErrNotSigned)) {
				t.Fatalf("Verify refused the signature of a fresh, well-formed header %q: %v", header, err)
			}
			return
		}
		if !carriesFreshSignature(header, body, before.Add(-paymentprovider.WebhookTolerance), time.Now().Add(paymentprovider.WebhookTolerance+time.Second)) {
			t.Fatalf("Verify accepted %q for body %q: no t=T with a matching v1 within %s of the clock",
				header, body, paymentprovider.WebhookTolerance)
		}
	})
}

// sign is the hex HMAC-SHA256 of "ts.body" under fuzzSecret.
func sign(ts string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(fuzzSecret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// carriesFreshSignature reports whether header holds a "t=T" with T
// between oldest and newest and a "v1=" whose value is the HMAC of
// "T.body" (T written in decimal, as the provider signs it).
func carriesFreshSignature(header string, body []byte, oldest, newest time.Time) bool {
	var stamps []int64
	var sigs [][]byte
	for _, pair := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				stamps = append(stamps, n)
			}
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	for _, ts := range stamps {
		if at := time.Unix(ts, 0); at.Before(oldest) || at.After(newest) {
			continue
		}
		want, _ := hex.DecodeString(sign(strconv.FormatInt(ts, 10), body))
		for _, s := range sigs {
			if hmac.Equal(s, want) {
				return true
			}
		}
	}
	return false
}
