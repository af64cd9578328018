package inventoryapi_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/services/inventory"
	"github.com/concordhq/concord/services/inventory/inventoryapi"
	"github.com/concordhq/concord/services/inventory/inventorystore"
)

func newAPI(t *testing.T) (*httptest.Server, *pgxpool.Pool) {
	t.Helper()
	pool := testkit.NewPool(t, outbox.Migrate, inventorystore.Migrate)
	mux := http.NewServeMux()
	(&inventoryapi.Handler{Pool: pool, Log: slog.New(slog.DiscardHandler)}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, pool
}

func receive(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url+"/admin/stock", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

func line(sku string, quantity string) string {
	return `{"items":[{"sku":` + sku + `,"quantity":` + quantity + `}]}`
}

// TestBadReceiptIs4xxNamingTheFieldNever500: NUL bytes (which PostgreSQL
// text refuses), quantities beyond int64 or the receipt limit and oversized
// SKUs are refused before the database sees them.
func TestBadReceiptIs4xxNamingTheFieldNever500(t *testing.T) {
	srv, pool := newAPI(t)
	maxQ := strconv.Itoa(inventory.MaxReceiveQuantity)
	cases := []struct {
		name, body string
		status     int
		field      string
	}{
		{"no items", `{"items":[]}`, 400, "items"},
		{"NUL in sku", line(`"SKU\u0000"`, "1"), 400, "items[0].sku"},
		{"control character in sku", line(`"SKU\n1"`, "1"), 400, "items[0].sku"},
		{"empty sku", line(`""`, "1"), 400, "items[0].sku"},
		{"sku too long", line(`"`+strings.Repeat("S", inventory.MaxSKULen+1)+`"`, "1"), 400, "items[0].sku"},
		{"zero quantity", line(`"A"`, "0"), 400, "items[0].quantity"},
		{"quantity over the receipt limit", line(`"A"`, maxQ+"1"), 400, "items[0].quantity"},
		{"quantity beyond int64", line(`"A"`, "9223372036854775808"), 400, "items.quantity"},
		{"quantity as string", line(`"A"`, `"1"`), 400, "items.quantity"},
		{"too many lines", `{"items":[` + strings.Repeat(`{"sku":"A","quantity":1},`, inventory.MaxReceiptLines) + `{"sku":"A","quantity":1}]}`, 400, "items"},
		{"body over the limit", `{"items":[{"sku":"` + strings.Repeat("x", inventoryapi.MaxBody) + `","quantity":1}]}`, 413, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, m := receive(t, srv.URL, c.body)
			if status != c.status || (c.field != "" && m["field"] != c.field) {
				t.Fatalf("status %d field %v (%v); want %d naming %q", status, m["field"], m["error"], c.status, c.field)
			}
			if msg, _ := m["error"].(string); msg == "" {
				t.Fatalf("no error message in %v", m)
			}
		})
	}
	if skus := testkit.Count(t, pool, `select count(*) from stock`); skus != 0 {
		t.Fatalf("bad receipts stored %d SKUs; want none", skus)
	}
	if status, m := receive(t, srv.URL, line(`"`+strings.Repeat("S", inventory.MaxSKULen)+`"`, maxQ)); status != http.StatusOK {
		t.Fatalf("largest accepted receipt: status %d (%v); want 200", status, m)
	}
}

// TestReceiptThatWouldOverflowStockIs400: stock already near the bigint
// limit (receipts add up over time) refuses one more receipt with 400
// instead of PostgreSQL's out-of-range error as a 500.
func TestReceiptThatWouldOverflowStockIs400(t *testing.T) {
	srv, pool := newAPI(t)
	if _, err := pool.Exec(context.Background(), `insert into stock (sku, received, available) values ('A', $1, $1)`, int64(math.MaxInt64-1)); err != nil {
		t.Fatal(err)
	}
	if status, m := receive(t, srv.URL, line(`"A"`, "2")); status != http.StatusBadRequest || m["field"] != "items" {
		t.Fatalf("status %d (%v); want 400 naming items", status, m)
	}
}
