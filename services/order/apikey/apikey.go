// Package apikey holds the order API's keys as values: how a key is made,
// how it is kept (its hash), how a request presents it and what its scopes
// allow. Storing keys is orderstore's; checking requests is orderapi's.
//
// A key is "ck_" and 43 characters of base64url: 256 bits from
// crypto/rand. It is shown once, when created; only its SHA-256 is kept.
// A fast, unsalted hash is right for such a key where it would be wrong
// for a password: nobody can guess a 256-bit random value, so the slow,
// salted hashes that make guessing a chosen password expensive buy
// nothing here, while a deterministic hash lets a request's key be found
// by an indexed equality lookup instead of a scan that checks every key.
// The lookup compares hashes, not keys: the time it takes depends on a
// hash the caller cannot steer towards a stored one, so it tells nothing
// about which keys exist, and no constant-time comparison is needed.
package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// Prefix starts every key: it tells an order API key apart in a
// configuration file or a leak report.
const Prefix = "ck_"

// keyBytes is the randomness of a key.
const keyBytes = 32

// Len is the length of a key.
var Len = len(Prefix) + base64.RawURLEncoding.EncodedLen(keyBytes)

// Scope is what a key may do.
type Scope string

// The scopes of the order API.
const (
	// OrdersWrite may create orders (POST /orders).
	OrdersWrite Scope = "orders:write"
	// OrdersRead may read orders (GET /orders, GET /orders/{id}).
	OrdersRead Scope = "orders:read"
)

// Scopes are every scope there is.
var Scopes = []Scope{OrdersWrite, OrdersRead}

// ParseScope reports whether s names a scope.
func ParseScope(s string) (Scope, bool) {
	sc := Scope(s)
	return sc, slices.Contains(Scopes, sc)
}

// MaxNameLen and MaxCustomerLen bound what an operator gives a key.
const (
	MaxNameLen     = 200
	MaxCustomerLen = 200
)

// Key is a stored key: everything but the key itself.
type Key struct {
	ID     int64   `json:"id"`
	Name   string  `json:"name"`
	Scopes []Scope `json:"scopes"`
	// CustomerID, when set, restricts the key to one customer's orders:
	// it creates orders for that customer only and reads only theirs.
	CustomerID string `json:"customer_id,omitempty"`
}

// Allows reports whether the key has scope.
func (k Key) Allows(scope Scope) bool { return slices.Contains(k.Scopes, scope) }

// MayActFor reports whether the key may create or read an order of
// customerID.
func (k Key) MayActFor(customerID string) bool {
	return k.CustomerID == "" || k.CustomerID == customerID
}

// New returns a fresh random key.
func New() string {
	b := make([]byte, keyBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it panics if the OS source does)
	return Prefix + base64.RawURLEncoding.EncodeToString(b)
}

// Hash is what is stored of key.
func Hash(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// WellFormed reports whether key could be a key; one that cannot is
// refused without a lookup.
func WellFormed(key string) bool {
	if len(key) != Len || !strings.HasPrefix(key, Prefix) {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(key[len(Prefix):])
	return err == nil
}

// FromAuthorization is the key an Authorization header value presents
// ("Bearer KEY", the scheme case-insensitive as RFC 9110 has it); ok is
// false when there is none.
func FromAuthorization(header string) (key string, ok bool) {
	scheme, key, found := strings.Cut(header, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	key = strings.TrimSpace(key)
	return key, key != ""
}

// Check judges what an operator asks a new key to be.
func Check(name string, scopes []Scope, customerID string) error {
	printable := func(s string) bool {
		return !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) })
	}
	switch {
	case strings.TrimSpace(name) == "":
		return fmt.Errorf("a key needs a name (who or what uses it)")
	case len(name) > MaxNameLen || !printable(name):
		return fmt.Errorf("name: want at most %d printable bytes", MaxNameLen)
	case len(scopes) == 0:
		return fmt.Errorf("a key needs at least one scope: %s", scopeList())
	case len(customerID) > MaxCustomerLen || !printable(customerID):
		return fmt.Errorf("customer: want at most %d printable bytes", MaxCustomerLen)
	}
	for _, s := range scopes {
		if _, ok := ParseScope(string(s)); !ok {
			return fmt.Errorf("scope %q: want %s", s, scopeList())
		}
	}
	return nil
}

func scopeList() string {
	s := make([]string, len(Scopes))
	for i, sc := range Scopes {
		s[i] = string(sc)
	}
	return strings.Join(s, " or ")
}
