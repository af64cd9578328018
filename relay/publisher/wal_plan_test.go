package publisher

import (
	"context"
	"strings"
	"testing"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
)

// The blocked keys are read when a WAL session starts, with the whole
// backlog pending. On a table filled too recently for statistics (a relay
// coming back from an outage) a join between the pending rows and the
// parked ones was planned as a nested loop over the pending rows twice:
// quadratic, minutes for 200,000 rows. The read must not join: the
// parked keys are looked up once, the pending rows by key.
func TestTheBlockedKeysReadDoesNotJoinThePendingRows(t *testing.T) {
	ctx := context.Background()
	pool := testkit.Pool(t, testkit.NewDatabase(t, testkit.PostgresURL(t)))
	if err := outbox.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	// A backlog as the relay finds it after an outage: no statistics yet.
	if _, err := pool.Exec(ctx, `insert into outbox (event_id, aggregate_type, aggregate_id, partition_key, key_hash,
		topic, event_type, event_version, payload)
		select gen_random_uuid(), 'order', 'o' || i, 'k' || (i % 1000), 1, 'orders', 'order.created', 2, '{}'
		  from generate_series(1, 60000) i`); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, "explain "+selectBlockedKeys)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(lines, "\n")
	if strings.Contains(text, "Join") || strings.Contains(text, "Nested Loop") {
		t.Fatalf("the blocked keys read joins the pending rows:\n%s", text)
	}
}
