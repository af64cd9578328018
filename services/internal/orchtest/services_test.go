package orchtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/schemas/contract"
)

// Orders placed with "flow": "orchestrated" through the real order API go
// through the orchestrator and the real inventory service (payment and
// shipping faked): one completes and commits its stock; one whose shipment
// is refused is cancelled with its stock released and its hold cancelled;
// one without stock is cancelled with only its hold cancelled. A
// choreographed order placed beside them never reaches the orchestrator.
func TestOrchestratedOrdersThroughTheOrderAndInventoryServices(t *testing.T) {
	d := newDeployment(t, opts{services: true})
	post := func(url string, body any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		if strings.HasPrefix(url, d.services["order-svc"]+"/") {
			req.Header.Set("Authorization", "Bearer "+d.orderKey)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		rb, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("POST %s: %s: %s", url, resp.Status, rb)
		}
		var m map[string]any
		_ = json.Unmarshal(rb, &m)
		return m
	}
	post(d.services["inventory-svc"]+"/admin/stock", map[string]any{"items": []map[string]any{{"sku": "KIT", "quantity": 5}}})
	order := func(qty int, flow string, pl plan) string {
		t.Helper()
		o := post(d.services["order-svc"]+"/orders", map[string]any{"customer_id": "cus_1", "currency": "USD", "flow": flow,
			"items":            []map[string]any{{"sku": "KIT", "quantity": qty, "unit_price": 1000}},
			"shipping_address": map[string]any{"line1": "1 Main St", "city": "Springfield", "postal_code": "12345", "country": "US"}})
		id := o["id"].(string)
		if o["flow"] != flow {
			t.Fatalf("order %s flow %v", id, o["flow"])
		}
		d.fakes.script(id, pl)
		return id
	}
	shipped := order(2, "orchestrated", nil)
	refused := order(1, "orchestrated", plan{contract.TypeShippingCreateShipment: {refuse}})
	noStock := order(10, "orchestrated", nil)
	chor := order(1, "choreographed", nil)

	orders := d.servicePools[0]
	testkit.Eventually(t, 60*time.Second, "orchestrated orders terminal", func() error {
		for _, id := range []string{shipped, refused, noStock} {
			var st string
			_ = orders.QueryRow(t.Context(), `select status from orders where id = $1`, id).Scan(&st)
			if st != "CONFIRMED" && st != "CANCELLED" {
				return fmt.Errorf("order %s is %s", id, st)
			}
		}
		return nil
	})
	got := testkit.Strings(t, orders, `select status || ' ' || coalesce(reason, '-') from orders where id = any($1::uuid[])
		order by array_position($1::uuid[], id)`, []string{shipped, refused, noStock})
	want := []string{"CONFIRMED -", "CANCELLED create_shipment_failed", "CANCELLED reserve_inventory_failed"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("orders %v, want %v", got, want)
	}
	st := d.waitTerminal(10*time.Second, shipped, refused, noStock)
	if st[shipped] != "COMPLETED" || st[refused] != "COMPENSATED" || st[noStock] != "COMPENSATED" {
		t.Errorf("sagas %v", st)
	}
	// Stock: the shipped order's 2 committed, the choreographed order's 1
	// reserved (no payment-svc runs to settle it), the rest back.
	testkit.Eventually(t, 20*time.Second, "stock settled", func() error {
		var avail, reserved, committed int
		if err := d.servicePools[1].QueryRow(t.Context(), `select available, reserved, committed from stock where sku = 'KIT'`).
			Scan(&avail, &reserved, &committed); err != nil {
			return err
		}
		if avail != 2 || reserved != 1 || committed != 2 {
			return fmt.Errorf("available %d reserved %d committed %d, want 2 1 2", avail, reserved, committed)
		}
		return nil
	})
	for id, want := range map[string]map[string]int{
		shipped: once("reserve_credit", "create_shipment", "capture_payment"),
		refused: once("reserve_credit", "create_shipment", "reserve_credit_compensate"),
		noStock: once("reserve_credit", "reserve_credit_compensate"),
	} {
		if got := d.sent(id); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("order %s: payment and shipping commands %v, want %v", id, got, want)
		}
	}
	if n := testkit.Count(t, d.pool, `select count(*) from saga_executions where saga_id = $1`, chor); n != 0 {
		t.Errorf("the choreographed order reached the orchestrator")
	}
}
