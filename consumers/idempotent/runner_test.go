package idempotent_test

import (
	"testing"
	"time"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/testkit"
)

func TestSameEventTwiceHasOneEffect(t *testing.T) {
	k := testkit.NewKafka(t)
	pool := testkit.NewPool(t)
	migrate(t, pool)
	topic := k.CreateTopic(t, "orders", 3)
	cl := k.Client(t)

	id, v := event(t, "k1", 1)
	other, v2 := event(t, "k1", 2)
	// The relay published the first event twice (at-least-once), with
	// another event in between.
	produce(t, cl, record(topic, "k1", id, v), record(topic, "k1", other, v2), record(topic, "k1", id, v))

	group := testkit.UniqueName(t, "g")
	r := start(t, idempotent.Config{Group: group, Topics: []string{topic}, Pool: pool, Kafka: kafkaConfig(k), Handler: insertEffect})
	eventually(t, 60*time.Second, "three records handled", func() error {
		if s := r.Stats(); s.Applied+s.Duplicates < 3 {
			return errStats(s)
		}
		return nil
	})
	if n := count(t, pool, `SELECT count(*) FROM effects WHERE event_id = $1`, id); n != 1 {
		t.Fatalf("effects of the doubled event = %d, want 1", n)
	}
	if s := r.Stats(); s.Applied != 2 || s.Duplicates != 1 {
		t.Fatalf("stats = %+v, want 2 applied and 1 duplicate", s)
	}
}
