package apikey_test

import (
	"bytes"
	"testing"

	"github.com/concordhq/concord/services/order/apikey"
)

func TestNewKeysAreWellFormedDistinctAndHashedToThirtyTwoBytes(t *testing.T) {
	a, b := apikey.New(), apikey.New()
	if a == b {
		t.Fatal("two new keys are equal")
	}
	for _, k := range []string{a, b} {
		if !apikey.WellFormed(k) || len(k) != apikey.Len {
			t.Fatalf("new key %q is not well formed", k)
		}
		if h := apikey.Hash(k); len(h) != 32 || bytes.Contains(h, []byte(k)) {
			t.Fatalf("hash of %q: %x", k, h)
		}
	}
	if bytes.Equal(apikey.Hash(a), apikey.Hash(b)) {
		t.Fatal("two keys hash alike")
	}
	for _, bad := range []string{"", "ck_", a[:len(a)-1], "xx" + a[2:], a[:10] + "!" + a[11:]} {
		if apikey.WellFormed(bad) {
			t.Errorf("%q is taken for a key", bad)
		}
	}
}

func TestFromAuthorization(t *testing.T) {
	for header, want := range map[string]string{
		"Bearer ck_abc": "ck_abc", "bearer ck_abc": "ck_abc", "BEARER  ck_abc ": "ck_abc",
		"": "", "Bearer": "", "Bearer ": "", "Basic dXNlcjpwdw==": "", "ck_abc": "",
	} {
		got, ok := apikey.FromAuthorization(header)
		if got != want || ok != (want != "") {
			t.Errorf("FromAuthorization(%q) = %q, %v; want %q", header, got, ok, want)
		}
	}
}

func TestScopesAndCustomer(t *testing.T) {
	k := apikey.Key{Scopes: []apikey.Scope{apikey.OrdersRead}, CustomerID: "cus_1"}
	if !k.Allows(apikey.OrdersRead) || k.Allows(apikey.OrdersWrite) {
		t.Fatalf("%+v: read %v write %v", k, k.Allows(apikey.OrdersRead), k.Allows(apikey.OrdersWrite))
	}
	if !k.MayActFor("cus_1") || k.MayActFor("cus_2") || k.MayActFor("") {
		t.Fatal("a customer's key acts for another customer")
	}
	if !(apikey.Key{}).MayActFor("anyone") {
		t.Fatal("a key without a customer is restricted")
	}
}

func TestCheck(t *testing.T) {
	w := []apikey.Scope{apikey.OrdersWrite}
	if err := apikey.Check("loadgen", w, ""); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"no name":       apikey.Check(" ", w, ""),
		"no scope":      apikey.Check("n", nil, ""),
		"unknown scope": apikey.Check("n", []apikey.Scope{"orders:delete"}, ""),
		"NUL in name":   apikey.Check("n\x00", w, ""),
		"NUL customer":  apikey.Check("n", w, "c\x00"),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
