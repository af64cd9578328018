package idempotent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/infra/testkit/proc"
)

// TestKill9BetweenDBCommitAndOffsetCommitAppliesOnce kills a consumer
// process right after its database commit, before its offset commit; the
// restarted consumer gets the batch again and must skip all of it.
func TestKill9BetweenDBCommitAndOffsetCommitAppliesOnce(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "crashconsumer")
	if err := proc.GoBuild(".", bin, "../internal/crashconsumer"); err != nil {
		t.Fatal(err)
	}

	k := testkit.NewKafka(t)
	dbURL := testkit.NewDatabase(t, testkit.PostgresURL(t))
	pool := testkit.Pool(t, dbURL)
	migrate(t, pool)
	topic := k.CreateTopic(t, "orders", 1)
	group := testkit.UniqueName(t, "g")
	cl := k.Client(t)
	const n = 50
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		id, v := event(t, "k", i)
		recs = append(recs, record(topic, "k", id, v))
	}
	produce(t, cl, recs...)

	crash := proc.Start(t, proc.Command{Name: "crashconsumer", Path: bin, Log: filepath.Join(t.TempDir(), "crashconsumer.log"),
		Env: []string{"CONCORD_DATABASE_URL=" + dbURL, "CONCORD_GROUP=" + group, "CONCORD_TOPIC=" + topic, "CONCORD_KAFKA_BROKERS=" + k.Brokers[0], "CONCORD_CRASH_AFTER_DB_COMMIT=true"}})
	select {
	case <-crash.Exited():
		if !crash.KilledBy(syscall.SIGKILL) {
			t.Fatalf("crashconsumer should die by SIGKILL, got %v", crash.ExitErr())
		}
	case <-time.After(90 * time.Second):
		t.Fatal("crashconsumer did not kill itself")
	}

	applied := count(t, pool, `SELECT count(*) FROM effects`)
	if applied == 0 {
		t.Fatal("the killed consumer committed no effect: the crash window was not reached")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := k.Admin(t).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup(topic, 0); ok && o.At > 0 {
		t.Fatalf("offset %d was committed for a batch the process died before committing", o.At)
	}

	r := start(t, idempotent.Config{Group: group, Topics: []string{topic}, Pool: pool, Kafka: kafkaConfig(k), Handler: insertEffect})
	eventually(t, 60*time.Second, "all events applied after restart", countIs(t, pool, n, `SELECT count(*) FROM effects`))
	eventually(t, 30*time.Second, "redelivery seen", func() error {
		if s := r.Stats(); s.Duplicates+s.Applied < n {
			return errStats(s)
		}
		return nil
	})
	if s := r.Stats(); s.Duplicates != int64(applied) {
		t.Fatalf("restart skipped %d duplicates, want the %d events the killed process committed", s.Duplicates, applied)
	}
	if d := count(t, pool, `SELECT count(*) FROM (SELECT event_id FROM effects GROUP BY event_id HAVING count(*) > 1) x`); d != 0 {
		t.Fatalf("%d events applied more than once", d)
	}
	fmt.Fprintf(os.Stderr, "killed after committing %d effects; restart skipped them\n", applied)
}

// TestAStaticMemberKilledAndRestartedTakesItsPartitionsBackAtOnce kills a
// consumer process that is a static group member, with a session timeout of a
// minute, and restarts it with the same instance id: it must apply new events
// long before the session timeout. A dynamic member restarted the same way
// waits for the group to expire the dead member first.
func TestAStaticMemberKilledAndRestartedTakesItsPartitionsBackAtOnce(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "crashconsumer")
	if err := proc.GoBuild(".", bin, "../internal/crashconsumer"); err != nil {
		t.Fatal(err)
	}
	k := testkit.NewKafka(t)
	dbURL := testkit.NewDatabase(t, testkit.PostgresURL(t))
	pool := testkit.Pool(t, dbURL)
	migrate(t, pool)
	topic := k.CreateTopic(t, "orders", 3)
	group := testkit.UniqueName(t, "g")
	cl := k.Client(t)
	const session = time.Minute
	const instance = "crashconsumer-1"
	batch := func(from, n int) {
		var recs []*kgo.Record
		for i := from; i < from+n; i++ {
			key := fmt.Sprintf("k%d", i%6)
			id, v := event(t, key, i)
			recs = append(recs, record(topic, key, id, v))
		}
		produce(t, cl, recs...)
	}

	batch(0, 30)
	first := proc.Start(t, proc.Command{Name: "crashconsumer", Path: bin, Log: filepath.Join(t.TempDir(), "crashconsumer.log"),
		Env: []string{"CONCORD_DATABASE_URL=" + dbURL, "CONCORD_GROUP=" + group, "CONCORD_TOPIC=" + topic, "CONCORD_KAFKA_BROKERS=" + k.Brokers[0],
			"CONCORD_GROUP_INSTANCE_ID=" + instance, "CONCORD_GROUP_SESSION_TIMEOUT=" + session.String()}})
	eventually(t, 60*time.Second, "the first process applied the first events", countIs(t, pool, 30, `SELECT count(*) FROM effects`))
	first.Kill()
	<-first.Exited()

	batch(30, 30)
	restarted := time.Now()
	start(t, idempotent.Config{Group: group, Topics: []string{topic}, Pool: pool, Kafka: kafkaConfig(k), Handler: insertEffect,
		InstanceID: instance, KafkaOpts: []kgo.Opt{kgo.SessionTimeout(session)}})
	// A third of the session timeout: a restart that waited for the dead
	// member's session to expire cannot make it.
	eventually(t, session/3, "the restarted static member applied the new events", countIs(t, pool, 60, `SELECT count(*) FROM effects`))
	if d := count(t, pool, `SELECT count(*) FROM (SELECT event_id FROM effects GROUP BY event_id HAVING count(*) > 1) x`); d != 0 {
		t.Fatalf("%d events applied more than once", d)
	}
	fmt.Fprintf(os.Stderr, "static member back and caught up %s after its restart (session timeout %s)\n", time.Since(restarted).Round(time.Millisecond), session)
}
