package orderapi_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/services/order"
	"github.com/concordhq/concord/services/order/apikey"
	"github.com/concordhq/concord/services/order/orderapi"
	"github.com/concordhq/concord/services/order/orderstore"
)

// testAPI is the order API served on its own database, with a key that
// may do everything.
type testAPI struct {
	URL   string
	Key   string
	Store *orderstore.Store
}

func newAPI(t *testing.T) (*testAPI, *pgxpool.Pool) {
	t.Helper()
	pool := testkit.NewPool(t, outbox.Migrate, orderstore.Migrate)
	store := &orderstore.Store{Pool: pool}
	mux := http.NewServeMux()
	(&orderapi.Handler{Store: store, Keys: store, Log: slog.New(slog.DiscardHandler)}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	key, _, err := store.CreateKey(context.Background(), "test", apikey.Scopes, "")
	if err != nil {
		t.Fatal(err)
	}
	return &testAPI{URL: srv.URL, Key: key, Store: store}, pool
}

// get GETs path with the API's key.
func (a *testAPI) get(t *testing.T, path string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, a.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+a.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func post(t *testing.T, a *testAPI, body, idemKey string) (*http.Response, map[string]any) {
	t.Helper()
	return postAs(t, a, a.Key, body, idemKey)
}

// postAs POSTs an order presenting key ("" presents none).
func postAs(t *testing.T, a *testAPI, key, body, idemKey string) (*http.Response, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, a.URL+"/orders", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp, m
}

const good = `{"customer_id":"cus_1","currency":"EUR","items":[{"sku":"SKU-1","quantity":2,"unit_price":1250}]}`

func TestBadInputIsRefusedWith4xxAndNothingIsStored(t *testing.T) {
	srv, pool := newAPI(t)
	cases := []struct {
		name, body string
		status     int
		field      string
	}{
		{"malformed JSON", `{"customer_id":`, 400, ""},
		{"not JSON", `hello`, 400, ""},
		{"empty body", ``, 400, ""},
		{"unknown field", `{"customer_id":"c","currency":"EUR","items":[{"sku":"A","quantity":1,"unit_price":1}],"coupon":"FREE"}`, 400, "coupon"},
		{"negative quantity", `{"customer_id":"c","currency":"EUR","items":[{"sku":"A","quantity":-1,"unit_price":1}]}`, 400, "items[0].quantity"},
		{"zero quantity", `{"customer_id":"c","currency":"EUR","items":[{"sku":"A","quantity":0,"unit_price":1}]}`, 400, "items[0].quantity"},
		{"negative price", `{"customer_id":"c","currency":"EUR","items":[{"sku":"A","quantity":1,"unit_price":-5}]}`, 400, "items[0].unit_price"},
		{"quantity as string", `{"customer_id":"c","currency":"EUR","items":[{"sku":"A","quantity":"2","unit_price":1}]}`, 400, "items.quantity"},
		{"no items", `{"customer_id":"c","currency":"EUR","items":[]}`, 400, "items"},
		{"bad currency", `{"customer_id":"c","currency":"euro","items":[{"sku":"A","quantity":1,"unit_price":1}]}`, 400, "currency"},
		{"two objects", good + good, 400, ""},
		{"unknown flow", `{"customer_id":"c","currency":"EUR","items":[{"sku":"A","quantity":1,"unit_price":1}],"flow":"psychic"}`, 400, "flow"},
		{"flow not a string", `{"customer_id":"c","currency":"EUR","items":[{"sku":"A","quantity":1,"unit_price":1}],"flow":1}`, 400, "flow"},
		{"orchestrated without address", `{"customer_id":"c","currency":"EUR","items":[{"sku":"A","quantity":1,"unit_price":1}],"flow":"orchestrated"}`, 400, "shipping_address"},
		{"huge body", `{"customer_id":"` + strings.Repeat("x", orderapi.MaxBody) + `"}`, 413, ""},
	}
	for _, c := range cases {
		resp, m := post(t, srv, c.body, "")
		if resp.StatusCode != c.status {
			t.Errorf("%s: status %d (%v); want %d", c.name, resp.StatusCode, m, c.status)
			continue
		}
		if m["error"] == nil || m["error"] == "" {
			t.Errorf("%s: no error message in %v", c.name, m)
		}
		if c.field != "" && m["field"] != c.field {
			t.Errorf("%s: field %v; want %q", c.name, m["field"], c.field)
		}
	}
	orders, events := stored(t, pool)
	if orders != 0 || events != 0 {
		t.Fatalf("bad requests stored %d orders and %d events; want none", orders, events)
	}
}

func TestIdempotencyKeyReturnsTheSameOrder(t *testing.T) {
	srv, pool := newAPI(t)
	r1, o1 := post(t, srv, good, "key-1")
	r2, o2 := post(t, srv, good, "key-1")
	if r1.StatusCode != 201 || r2.StatusCode != 200 || o1["id"] != o2["id"] {
		t.Fatalf("first %d %v, retry %d %v; want 201 then 200 with the same id", r1.StatusCode, o1["id"], r2.StatusCode, o2["id"])
	}
	r3, m := post(t, srv, strings.Replace(good, `"quantity":2`, `"quantity":3`, 1), "key-1")
	if r3.StatusCode != 422 || m["field"] != "Idempotency-Key" {
		t.Fatalf("same key, other body: %d %v; want 422 naming Idempotency-Key", r3.StatusCode, m)
	}
	// Whoever used the key first, the refusal names no order of theirs.
	if msg, _ := m["error"].(string); strings.Contains(msg, o1["id"].(string)) {
		t.Fatalf("the 422 names the first order: %q", msg)
	}
	orders, events := stored(t, pool)
	if orders != 1 || events != 1 {
		t.Fatalf("%d orders and %d events; want 1 and 1", orders, events)
	}
}

func TestGetAndListOrders(t *testing.T) {
	srv, _ := newAPI(t)
	withAddress := strings.Replace(good, `"currency"`, `"shipping_address":{"line1":"Hauptstr. 1","city":"Berlin","postal_code":"10115","country":"DE"},"currency"`, 1)
	_, o := post(t, srv, withAddress, "")
	resp := srv.get(t, "/orders/"+o["id"].(string))
	var whole map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&whole)
	resp.Body.Close()
	// The POST answer is built from the request, not read back; it must
	// be what is stored.
	if !reflect.DeepEqual(whole, o) {
		t.Fatalf("POST answered %v\nGET answers %v", o, whole)
	}
	var got struct {
		Status  string
		History []map[string]any
	}
	b, _ := json.Marshal(whole)
	_ = json.Unmarshal(b, &got)
	if got.Status != "PENDING" || len(got.History) != 1 {
		t.Fatalf("GET order = %+v; want PENDING with one history entry", got)
	}
	// The POST answer's history is built without reading it back; it must
	// be what is stored.
	posted, _ := json.Marshal(o["history"])
	stored, _ := json.Marshal(got.History)
	if string(posted) != string(stored) {
		t.Fatalf("POST answered history %s; stored %s", posted, stored)
	}
	for path, want := range map[string]int{"/orders/not-a-uuid": 404, "/orders/01a22990-d960-7727-a960-5db346c37962": 404,
		"/orders?status=PENDING": 200, "/orders?status=bogus": 400, "/orders?limit=0": 400} {
		resp := srv.get(t, path)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s = %d; want %d", path, resp.StatusCode, want)
		}
	}
}

// The order, its event and its history row are written as one batch
// without BEGIN; PostgreSQL must still keep them or drop them together.
func TestAFailedOrderWriteStoresNothing(t *testing.T) {
	srv, pool := newAPI(t)
	if _, err := pool.Exec(context.Background(), `alter table order_history add constraint refuse_all check (false) not valid`); err != nil {
		t.Fatal(err)
	}
	resp, _ := post(t, srv, good, "")
	if resp.StatusCode < 500 {
		t.Fatalf("POST with the history insert failing: %d; want a 5xx", resp.StatusCode)
	}
	orders, events := stored(t, pool)
	if orders != 0 || events != 0 {
		t.Fatalf("a failed POST left %d orders and %d events; want none", orders, events)
	}
}

// TestHostileFieldsAre400NamingTheFieldNever500: NUL bytes (which
// PostgreSQL text and jsonb refuse), numbers beyond int64 and oversized
// strings are refused by validation, before the database sees them.
func TestHostileFieldsAre400NamingTheFieldNever500(t *testing.T) {
	srv, pool := newAPI(t)
	addr := func(field, value string) string {
		a := map[string]string{"line1": "Hauptstr. 1", "city": "Berlin", "postal_code": "10115", "country": "DE"}
		a[field] = value
		b, _ := json.Marshal(map[string]any{"customer_id": "c", "currency": "EUR",
			"items": []any{map[string]any{"sku": "A", "quantity": 1, "unit_price": 1}}, "shipping_address": a})
		return string(b)
	}
	item := func(sku, quantity, price string) string {
		return `{"customer_id":"c","currency":"EUR","items":[{"sku":` + sku + `,"quantity":` + quantity + `,"unit_price":` + price + `}]}`
	}
	long := func(n int) string { return strings.Repeat("x", n) }
	cases := []struct {
		name, body, key, field string
	}{
		{"NUL in customer_id", `{"customer_id":"c\u0000","currency":"EUR","items":[{"sku":"A","quantity":1,"unit_price":1}]}`, "", "customer_id"},
		{"NUL in sku", item(`"A\u0000"`, "1", "1"), "", "items[0].sku"},
		{"NUL in currency", `{"customer_id":"c","currency":"EU\u0000","items":[{"sku":"A","quantity":1,"unit_price":1}]}`, "", "currency"},
		{"NUL in payment_method", `{"customer_id":"c","currency":"EUR","payment_method":"pm\u0000","items":[{"sku":"A","quantity":1,"unit_price":1}]}`, "", "payment_method"},
		{"NUL in line1", addr("line1", "Main\x00St"), "", "shipping_address.line1"},
		{"NUL in line2", addr("line2", "\x00"), "", "shipping_address.line2"},
		{"NUL in city", addr("city", "Berlin\x00"), "", "shipping_address.city"},
		{"NUL in postal_code", addr("postal_code", "10\x00115"), "", "shipping_address.postal_code"},
		{"quantity beyond int64", item(`"A"`, "9223372036854775808", "1"), "", "items.quantity"},
		{"price beyond int64", item(`"A"`, "1", "99999999999999999999"), "", "items.unit_price"},
		{"quantity × price beyond int64", item(`"A"`, "9223372036854775807", "9223372036854775807"), "", "items[0].quantity"},
		{"customer_id too long", `{"customer_id":"` + long(order.MaxIDLen+1) + `","currency":"EUR","items":[{"sku":"A","quantity":1,"unit_price":1}]}`, "", "customer_id"},
		{"sku too long", item(`"`+long(order.MaxIDLen+1)+`"`, "1", "1"), "", "items[0].sku"},
		{"currency too long", `{"customer_id":"c","currency":"` + long(1000) + `","items":[{"sku":"A","quantity":1,"unit_price":1}]}`, "", "currency"},
		{"payment_method too long", `{"customer_id":"c","currency":"EUR","payment_method":"` + long(order.MaxIDLen+1) + `","items":[{"sku":"A","quantity":1,"unit_price":1}]}`, "", "payment_method"},
		{"line1 too long", addr("line1", long(order.MaxAddressLineLen+1)), "", "shipping_address.line1"},
		{"line2 too long", addr("line2", long(order.MaxAddressLineLen+1)), "", "shipping_address.line2"},
		{"city too long", addr("city", long(order.MaxCityLen+1)), "", "shipping_address.city"},
		{"postal_code too long", addr("postal_code", long(order.MaxPostalCodeLen+1)), "", "shipping_address.postal_code"},
		{"country too long", addr("country", long(1000)), "", "shipping_address.country"},
		{"Idempotency-Key too long", good, long(order.MaxIdempotencyKeyLen + 1), "Idempotency-Key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, m := post(t, srv, c.body, c.key)
			if resp.StatusCode != http.StatusBadRequest || m["field"] != c.field {
				t.Fatalf("status %d field %v (%v); want 400 naming %s", resp.StatusCode, m["field"], m["error"], c.field)
			}
			if msg, _ := m["error"].(string); msg == "" {
				t.Fatalf("no error message in %v", m)
			}
		})
	}
	if orders := testkit.Count(t, pool, `select count(*) from orders`); orders != 0 {
		t.Fatalf("hostile requests stored %d orders; want none", orders)
	}
	// The longest accepted values are stored.
	if resp, m := post(t, srv, addr("line1", long(order.MaxAddressLineLen)), long(order.MaxIdempotencyKeyLen)); resp.StatusCode != http.StatusCreated {
		t.Fatalf("longest accepted values: status %d (%v); want 201", resp.StatusCode, m)
	}
}

// stored counts the orders and outbox events in pool's database.
func stored(t *testing.T, pool *pgxpool.Pool) (orders, events int) {
	t.Helper()
	return testkit.Count(t, pool, `select count(*) from orders`), testkit.Count(t, pool, `select count(*) from outbox`)
}
