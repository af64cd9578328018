package testkit_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/infra/testkit"
)

func TestMain(m *testing.M) { testkit.MainWithPrivatePostgres(m) }

// The package's private server outlives the test that started it, is the
// same for every test of the binary, is not the shared server, and can
// stream logical replication.
func TestPackagePostgresIsOneServerOfItsOwnWithLogicalWAL(t *testing.T) {
	var urls []string
	for _, name := range []string{"first", "second"} {
		t.Run(name, func(t *testing.T) {
			url := testkit.PackagePostgresURL(t)
			var level string
			if err := testkit.Pool(t, url).QueryRow(context.Background(), "show wal_level").Scan(&level); err != nil {
				t.Fatal(err)
			}
			if level != "logical" {
				t.Fatalf("wal_level %s, want logical", level)
			}
			urls = append(urls, url)
		})
	}
	if len(urls) != 2 || urls[0] != urls[1] {
		t.Fatalf("package servers %v, want one", urls)
	}
	if urls[0] == os.Getenv("CONCORD_POSTGRES_URL") {
		t.Fatalf("the package server is the shared one: %s", urls[0])
	}
}

func TestKafkaChoiceRefusesKfakeUnderCI(t *testing.T) {
	noDocker := func() bool { return false }
	withDocker := func() bool { return true }
	cases := []struct {
		ci        bool
		brokers   string
		docker    func() bool
		wantKind  string
		wantRefus bool
	}{
		{ci: true, brokers: "", docker: noDocker, wantRefus: true},
		{ci: true, brokers: "", docker: withDocker, wantRefus: true},
		{ci: true, brokers: "127.0.0.1:19092", docker: noDocker, wantKind: "env"},
		{ci: false, brokers: " ", docker: noDocker, wantKind: "kfake"},
		{ci: false, brokers: "", docker: withDocker, wantKind: "testcontainers"},
		{ci: false, brokers: "b:9092", docker: withDocker, wantKind: "env"},
	}
	for _, c := range cases {
		kind, refuse := testkit.KafkaFromEnv(c.ci, c.brokers, c.docker)
		if c.wantRefus {
			if refuse == "" || !strings.Contains(refuse, "CONCORD_KAFKA_BROKERS") {
				t.Errorf("ci=%v brokers=%q: got kind %q, want a refusal naming CONCORD_KAFKA_BROKERS", c.ci, c.brokers, kind)
			}
			continue
		}
		if kind != c.wantKind || refuse != "" {
			t.Errorf("ci=%v brokers=%q docker=%v: got %q %q, want %q", c.ci, c.brokers, c.docker(), kind, refuse, c.wantKind)
		}
	}
}

func TestKafkaSameKeyLandsOnOnePartitionInOrder(t *testing.T) {
	k := testkit.NewKafka(t)
	topic := k.CreateTopic(t, "roundtrip", 6)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	producer := k.Client(t, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	keys := []string{"order-a", "order-b", "order-c"}
	const perKey = 50
	for i := 0; i < perKey; i++ {
		for _, key := range keys {
			producer.Produce(ctx, &kgo.Record{Key: []byte(key), Value: []byte(fmt.Sprintf("%s/%d", key, i))}, nil)
		}
	}
	if err := producer.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	consumer := k.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	partitionOf := map[string]int32{}
	next := map[string]int{}
	for got := 0; got < perKey*len(keys); {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", got, perKey*len(keys), err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			key := string(r.Key)
			if p, ok := partitionOf[key]; ok && p != r.Partition {
				t.Fatalf("key %s on partitions %d and %d", key, p, r.Partition)
			}
			partitionOf[key] = r.Partition
			if want := fmt.Sprintf("%s/%d", key, next[key]); string(r.Value) != want {
				t.Fatalf("key %s: got %s, want %s (out of order)", key, r.Value, want)
			}
			next[key]++
			got++
		})
	}
}

func TestPostgresDatabasesArePerTestAndDropped(t *testing.T) {
	admin := testkit.PostgresURL(t)
	var names []string
	t.Run("a", func(t *testing.T) {
		pool := testkit.NewPool(t)
		ctx := context.Background()
		if _, err := pool.Exec(ctx, "create table marker (v text)"); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, "insert into marker values ('a')"); err != nil {
			t.Fatal(err)
		}
		var db string
		if err := pool.QueryRow(ctx, "select current_database()").Scan(&db); err != nil {
			t.Fatal(err)
		}
		names = append(names, db)
	})
	t.Run("b", func(t *testing.T) {
		pool := testkit.NewPool(t)
		ctx := context.Background()
		var exists bool
		if err := pool.QueryRow(ctx, "select to_regclass('marker') is not null").Scan(&exists); err != nil {
			t.Fatal(err)
		}
		if exists {
			t.Fatal("a table of another test's database is visible")
		}
		var db string
		_ = pool.QueryRow(ctx, "select current_database()").Scan(&db)
		names = append(names, db)
	})
	if len(names) != 2 || names[0] == names[1] {
		t.Fatalf("databases %v, want two distinct", names)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var left int
	if err := conn.QueryRow(ctx, "select count(*) from pg_database where datname = any($1)", names).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d per-test databases were not dropped", left)
	}
}

func TestPrivatePostgresSurvivesKillAndRestart(t *testing.T) {
	pg := testkit.NewPrivatePostgres(t)
	ctx := context.Background()
	pool := testkit.Pool(t, pg.URL)
	if _, err := pool.Exec(ctx, "create table t (v int); insert into t values (1)"); err != nil {
		t.Fatal(err)
	}
	pg.Kill(t)
	// The backends die with the postmaster, but not at the same instant.
	testkit.Eventually(t, 10*time.Second, "the killed server refuses pings", func() error {
		if err := pool.Ping(ctx); err == nil {
			return fmt.Errorf("ping succeeded while the server was killed")
		}
		return nil
	})
	pg.Start(t)
	var v int
	if err := pool.QueryRow(ctx, "select v from t").Scan(&v); err != nil || v != 1 {
		t.Fatalf("after restart: v=%d err=%v", v, err)
	}
}

func TestPrivateKafkaKeepsDataAcrossRestart(t *testing.T) {
	pk := testkit.NewPrivateKafka(t)
	k := pk.Kafka()
	topic := k.CreateTopic(t, "private", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p := k.Client(t, kgo.DefaultProduceTopic(topic))
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("kept")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pk.Stop(t)
	pk.Start(t)
	c := k.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("record not found after restart")
		}
		var found bool
		fs.EachRecord(func(r *kgo.Record) { found = found || string(r.Value) == "kept" })
		if found {
			return
		}
	}
}
