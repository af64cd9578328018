package contradiction_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/services/internal/contradiction"
	"github.com/concordhq/concord/services/inventory/inventorystore"
)

func counted(t *testing.T, labels map[string]string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := contradiction.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if err := contradiction.RegisterMetrics(reg); err != nil {
		t.Fatalf("a second registration: %v", err)
	}
	return testkit.Gather(t, reg).Value("concord_contradicting_events_total", labels)
}

// A refusal is one review entry and one count however often it is
// recorded (a redelivery of a refused event), and a person resolves it
// once, with a note.
func TestARefusalIsRecordedAndCountedOnceAndResolvedOnce(t *testing.T) {
	pool := testkit.NewPool(t, inventorystore.Migrate) // any service's refused_events
	ctx := context.Background()
	labels := map[string]string{"service": "test-svc", "type": "order.cancelled", "reason": "order_confirmed"}
	before := counted(t, labels)
	r := contradiction.Refusal{Service: "test-svc", EventID: schemas.NewEventID(), EventType: "order.cancelled",
		OrderID: "o-1", Reason: "order_confirmed", Detail: "confirmed", Data: []byte(`{"order_id":"o-1"}`)}
	bad := r
	bad.EventID, bad.OrderID, bad.Data = schemas.NewEventID(), "o-2", []byte("not JSON")
	for range 2 {
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return contradiction.Record(ctx, tx, r, bad) }); err != nil {
			t.Fatal(err)
		}
	}
	open, err := contradiction.List(ctx, pool, "")
	if err != nil || len(open) != 2 || open[0].EventID != r.EventID || open[0].Reason != "order_confirmed" || open[1].OrderID != "o-2" {
		t.Fatalf("open refusals %+v, %v; want the two, in order", open, err)
	}
	if got := counted(t, labels); got != before+2 {
		t.Fatalf("counted %v; want %v", got, before+2)
	}
	if err := contradiction.Resolve(ctx, pool, open[0].ID, "", ""); err == nil {
		t.Fatal("resolved without who and a note")
	}
	if err := contradiction.Resolve(ctx, pool, open[0].ID, "ann", "forged; broker ACLs fixed"); err != nil {
		t.Fatal(err)
	}
	if err := contradiction.Resolve(ctx, pool, open[0].ID, "bob", "again"); !errors.Is(err, contradiction.ErrNotOpen) {
		t.Fatalf("a second resolve: %v; want ErrNotOpen", err)
	}
	if open, _ := contradiction.List(ctx, pool, "o-1"); len(open) != 0 {
		t.Fatalf("resolved refusal still open: %+v", open)
	}
}
