package orderapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/services/order/apikey"
)

// request sends method path with the Authorization header auth ("" sends
// none) and returns the response with its whole body.
func request(t *testing.T, a *testAPI, method, path, auth, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, a.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func newKey(t *testing.T, a *testAPI, customer string, scopes ...apikey.Scope) string {
	t.Helper()
	key, _, err := a.Store.CreateKey(context.Background(), "test "+t.Name(), scopes, customer)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// errorBody is the JSON error of a refused request.
func errorBody(t *testing.T, what, body string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil || m["error"] == nil || m["error"] == "" {
		t.Errorf("%s: body %q is not a JSON error", what, body)
	}
	return m
}

// Without a live key — none, another scheme, a made-up key, a revoked
// key — a request is 401 with WWW-Authenticate: Bearer, stores nothing
// and answers nothing of any order.
func TestWithoutALiveKeyNothingIsStoredAndNothingRead(t *testing.T) {
	a, pool := newAPI(t)
	withAddress := strings.Replace(good, `"currency"`, `"shipping_address":{"line1":"Secret Lane 7","city":"Berlin","postal_code":"10115","country":"DE"},"currency"`, 1)
	_, o := post(t, a, withAddress, "")
	id, _ := o["id"].(string)
	if id == "" {
		t.Fatalf("setup order not created: %v", o)
	}
	revoked := newKey(t, a, "", apikey.Scopes...)
	keys, err := a.Store.Keys(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Store.RevokeKey(context.Background(), keys[len(keys)-1].ID); err != nil {
		t.Fatal(err)
	}
	ordersBefore, eventsBefore := stored(t, pool)
	for name, auth := range map[string]string{
		"no Authorization":   "",
		"Basic scheme":       "Basic dXNlcjpwYXNz",
		"Bearer without key": "Bearer ",
		"unknown key":        "Bearer " + apikey.New(),
		"not a key":          "Bearer hunter2",
		"revoked key":        "Bearer " + revoked,
		"key without Bearer": a.Key,
	} {
		for _, rq := range []struct{ method, path string }{{"POST", "/orders"}, {"GET", "/orders"}, {"GET", "/orders/" + id}} {
			resp, body := request(t, a, rq.method, rq.path, auth, strings.Replace(good, "cus_1", "cus_intruder", 1))
			what := name + ": " + rq.method + " " + rq.path
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s: %d; want 401", what, resp.StatusCode)
			}
			if h := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(h, "Bearer") {
				t.Errorf("%s: WWW-Authenticate %q; want Bearer", what, h)
			}
			if m := errorBody(t, what, body); m["field"] != "Authorization" {
				t.Errorf("%s: field %v; want Authorization", what, m["field"])
			}
			for _, secret := range []string{id, "Secret Lane", "cus_1"} {
				if strings.Contains(body, secret) {
					t.Errorf("%s: the answer holds %q: %s", what, secret, body)
				}
			}
		}
	}
	if orders, events := stored(t, pool); orders != ordersBefore || events != eventsBefore {
		t.Fatalf("unauthenticated requests: %d orders and %d events, %d and %d before", orders, events, ordersBefore, eventsBefore)
	}
	// The revoked key worked before it was revoked; a live one still does.
	if resp, body := request(t, a, "GET", "/orders/"+id, "Bearer "+a.Key, ""); resp.StatusCode != http.StatusOK || !strings.Contains(body, id) {
		t.Fatalf("a live key reads %d %s; want 200 with the order", resp.StatusCode, body)
	}
}

// A key lacking the route's scope is 403 naming the scope: a read-only
// key creates nothing, a write-only key reads nothing.
func TestAKeyWithoutTheScopeIsRefused(t *testing.T) {
	a, pool := newAPI(t)
	_, o := post(t, a, good, "")
	id, _ := o["id"].(string)
	readOnly := newKey(t, a, "", apikey.OrdersRead)
	writeOnly := newKey(t, a, "", apikey.OrdersWrite)
	ordersBefore, eventsBefore := stored(t, pool)

	resp, raw := request(t, a, "POST", "/orders", "Bearer "+readOnly, good)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="insufficient_scope"`) {
		t.Errorf("POST with a read-only key: %d %q; want 403 insufficient_scope", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	if m := errorBody(t, "POST read-only", raw); m["scope"] != string(apikey.OrdersWrite) {
		t.Errorf("POST with a read-only key: scope %v; want %s", m["scope"], apikey.OrdersWrite)
	}
	if orders, events := stored(t, pool); orders != ordersBefore || events != eventsBefore {
		t.Fatalf("a read-only key stored %d orders and %d events (%d and %d before)", orders, events, ordersBefore, eventsBefore)
	}
	for _, path := range []string{"/orders", "/orders/" + id, "/orders?status=PENDING"} {
		resp, body := request(t, a, "GET", path, "Bearer "+writeOnly, "")
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s with a write-only key: %d; want 403", path, resp.StatusCode)
		}
		if m := errorBody(t, "GET "+path, body); m["scope"] != string(apikey.OrdersRead) {
			t.Errorf("GET %s with a write-only key: scope %v; want %s", path, m["scope"], apikey.OrdersRead)
		}
		if strings.Contains(body, id) || strings.Contains(body, "cus_1") {
			t.Errorf("GET %s with a write-only key answers an order: %s", path, body)
		}
	}
	// Each key does what its scope allows.
	if resp, _ := request(t, a, "GET", "/orders/"+id, "Bearer "+readOnly, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("GET with a read-only key: %d; want 200", resp.StatusCode)
	}
	if resp, _ := request(t, a, "POST", "/orders", "Bearer "+writeOnly, good); resp.StatusCode != http.StatusCreated {
		t.Errorf("POST with a write-only key: %d; want 201", resp.StatusCode)
	}
	// A repeat of an earlier request (same Idempotency-Key and body) gets
	// the order's id back, not the order as it is now: that would be
	// reading it.
	if _, first := post(t, a, good, "repeat-1"); first["id"] == nil {
		t.Fatalf("setup: %v", first)
	}
	resp, repeat := postAs(t, a, writeOnly, good, "repeat-1")
	if resp.StatusCode != http.StatusOK || len(repeat) != 1 || repeat["id"] == nil {
		t.Errorf("a repeat with a write-only key: %d %v; want 200 with the id only", resp.StatusCode, repeat)
	}
}

// A key restricted to a customer creates and reads that customer's
// orders only; another customer's order is as if it did not exist.
func TestACustomersKeyCreatesAndReadsOnlyTheirOrders(t *testing.T) {
	a, pool := newAPI(t)
	_, theirs := post(t, a, strings.Replace(good, "cus_1", "cus_other", 1), "")
	mine := newKey(t, a, "cus_1", apikey.Scopes...)
	resp, body := request(t, a, "POST", "/orders", "Bearer "+mine, good)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST for the key's customer: %d %s", resp.StatusCode, body)
	}
	var own map[string]any
	_ = json.Unmarshal([]byte(body), &own)
	before, _ := stored(t, pool)
	resp, body = request(t, a, "POST", "/orders", "Bearer "+mine, strings.Replace(good, "cus_1", "cus_other", 1))
	if m := errorBody(t, "POST for another customer", body); resp.StatusCode != http.StatusForbidden || m["field"] != "customer_id" {
		t.Errorf("POST for another customer: %d %s; want 403 naming customer_id", resp.StatusCode, body)
	}
	if after, _ := stored(t, pool); after != before {
		t.Fatalf("a customer's key stored an order of another customer")
	}
	resp, body = request(t, a, "GET", "/orders/"+theirs["id"].(string), "Bearer "+mine, "")
	if resp.StatusCode != http.StatusNotFound || strings.Contains(body, "cus_other") {
		t.Errorf("GET another customer's order: %d %s; want 404", resp.StatusCode, body)
	}
	resp, body = request(t, a, "GET", "/orders", "Bearer "+mine, "")
	var list struct{ Orders []map[string]any }
	_ = json.Unmarshal([]byte(body), &list)
	if resp.StatusCode != http.StatusOK || len(list.Orders) != 1 || list.Orders[0]["id"] != own["id"] {
		t.Errorf("GET /orders with a customer's key: %d %s; want only %v", resp.StatusCode, body, own["id"])
	}
}

// The table holds the key's hash, never the key: reading every column of
// every row finds neither the key nor its random part.
func TestKeysAreNotStoredInClear(t *testing.T) {
	a, pool := newAPI(t)
	key := newKey(t, a, "", apikey.OrdersRead)
	rows := testkit.Count(t, pool, `select count(*) from api_keys`)
	if rows != 2 {
		t.Fatalf("%d keys stored; want 2", rows)
	}
	all, err := pool.Query(context.Background(), `select k::text, encode(key_hash, 'hex'), encode(key_hash, 'base64'), encode(key_hash, 'escape') from api_keys k`)
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	found := false
	for all.Next() {
		var row, hexHash, b64, esc string
		if err := all.Scan(&row, &hexHash, &b64, &esc); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{key, a.Key} {
			for _, part := range []string{k, strings.TrimPrefix(k, apikey.Prefix)} {
				for _, col := range []string{row, hexHash, b64, esc} {
					if strings.Contains(col, part) {
						t.Fatalf("api_keys holds the key %q in clear: %s", k, col)
					}
				}
			}
		}
		sum := sha256.Sum256([]byte(key))
		found = found || hexHash == hex.EncodeToString(sum[:])
	}
	if err := all.Err(); err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Fatal("no row holds the key's SHA-256")
	}
}
