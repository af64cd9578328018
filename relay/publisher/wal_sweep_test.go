package publisher

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/internal/relaytest"
	"github.com/concordhq/concord/relay/outbox"
)

// The sweep of blocked keys runs beside the stream. When it meets a key
// whose parked row stands behind an earlier row the stream has produced but
// not yet settled, it leaves the key alone: producing the rows in front
// would mean producing the parked row again, counting one more attempt
// against it (a run of make test saw a row parked with 4 attempts of 3)
// and publishing what an operator has not released.
func TestTheSweepLeavesAKeyWhoseParkedRowStandsBehindAnUnsettledOne(t *testing.T) {
	k := testkit.NewKafka(t)
	pool := testkit.NewPool(t, outbox.Migrate)
	topic := k.CreateTopic(t, "sweep", 1)
	key := relaytest.Keys(1)[0]
	unsettled := relaytest.Append(t, pool, topic, key, 1, 0)
	parked := relaytest.Append(t, pool, topic, key, 2, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pool.Exec(ctx, `update outbox set attempts = 3, parked_at = now() where id = $1`, parked); err != nil {
		t.Fatal(err)
	}
	w, err := NewWAL(WALConfig{Config: Config{Pool: pool, Kafka: k.Config(), MaxAttempts: 3}})
	if err != nil {
		t.Fatal(err)
	}
	w.client = k.Client(t, kgo.ProducerLinger(0))
	w.adm = kadm.NewClient(w.client)
	s := &walSession{blocked: map[string]int64{key: parked}}

	if err := w.sweepBlocked(ctx, s); err != nil {
		t.Fatal(err)
	}
	var attempts int
	var published bool
	if err := pool.QueryRow(ctx, `select attempts, published_at is not null from outbox where id = $1`, parked).Scan(&attempts, &published); err != nil {
		t.Fatal(err)
	}
	if attempts != 3 || published {
		t.Errorf("parked row after the sweep: %d attempts, published %v; want 3 and not published", attempts, published)
	}
	if _, still := s.blocked[key]; !still {
		t.Error("the sweep unblocked a key whose row is parked")
	}
	offs, err := k.Admin(t).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offs.Lookup(topic, 0); o.Offset != 0 {
		t.Errorf("the sweep produced %d records of a blocked key (row %d is the stream's)", o.Offset, unsettled)
	}
}
