package main_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/infra/testkit/proc"
	"github.com/concordhq/concord/relay/internal/relaytest"
	"github.com/concordhq/concord/relay/outbox"
)

// The WAL relay's tests create replication slots on a private server of
// this package's own (newWALOutbox): see testkit.PackagePostgresURL.
func TestMain(m *testing.M) { testkit.MainWithPrivatePostgres(m) }

// newOutbox creates a fresh database with the outbox on the shared server
// and returns its URL and a count(*) query on it.
func newOutbox(t *testing.T) (string, func(q string, args ...any) int) {
	t.Helper()
	return newOutboxOn(t, testkit.PostgresURL(t))
}

func newOutboxOn(t *testing.T, adminURL string) (string, func(q string, args ...any) int) {
	t.Helper()
	url := testkit.NewDatabase(t, adminURL)
	pool := testkit.Pool(t, url)
	if err := outbox.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	return url, func(q string, args ...any) int { return relaytest.Count(t, pool, q, args...) }
}

func TestRelayKilledMidBatchThenRestartedLosesNothingAndKeepsKeyOrder(t *testing.T) {
	k := testkit.NewKafka(t)
	url, _ := newOutbox(t)
	pool := testkit.Pool(t, url)
	topic := k.CreateTopic(t, "kill9", 4)
	keys := relaytest.Keys(100)
	const perKey = 100
	relaytest.Fill(t, pool, topic, keys, perKey, 200)

	// Small batches and one worker, so the kill lands between produce and mark.
	args := []string{"--batch-size", "200", "--workers", "1", "--shards", "8"}
	first := relaytest.StartRelay(t, "relay-1", url, k, args...)
	killWhilePublishingThenRestart(t, first, url, k, topic, keys, perKey, args)
}

// killWhilePublishingThenRestart kills relay first once it has marked
// 1000 rows published, then restartAndCheck.
func killWhilePublishingThenRestart(t *testing.T, first *proc.Process, url string, k *testkit.Kafka,
	topic string, keys []string, perKey int, args []string) {
	t.Helper()
	pool := testkit.Pool(t, url)
	relaytest.WaitFor(t, 60*time.Second, "relay publishing", func() error {
		if n := relaytest.Count(t, pool, "select count(*) from outbox where published_at is not null"); n < 1000 {
			return fmt.Errorf("%d published", n)
		}
		return nil
	})
	first.Kill()
	left := relaytest.Count(t, pool, "select count(*) from outbox where published_at is null")
	if left == 0 {
		t.Fatal("the relay finished before it was killed; the test proves nothing")
	}
	t.Logf("killed with %d rows not marked published", left)
	restartAndCheck(t, url, k, topic, keys, perKey, args)
}

// restartAndCheck starts a relay with args after another was killed, and
// checks that every key's perKey events reach Kafka in order and every row
// ends up marked published.
func restartAndCheck(t *testing.T, url string, k *testkit.Kafka, topic string, keys []string, perKey int, args []string) {
	t.Helper()
	relaytest.StartRelay(t, "relay-2", url, k, args...)
	check := relaytest.NewChecker(t, k, topic)
	check.WaitAll(keys, perKey, 120*time.Second)
	if errs := check.Errors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	relaytest.WaitAllPublished(t, testkit.Pool(t, url), 30*time.Second)
	t.Logf("%s", check.Summary(keys, perKey))
}

func TestThreeRelaysKeepPerKeyOrderAndTakeOverTheShardsOfOneKilled(t *testing.T) {
	k := testkit.NewKafka(t)
	url, count := newOutbox(t)
	pool := testkit.Pool(t, url)
	topic := k.CreateTopic(t, "three", 6)
	keys := relaytest.Keys(500)
	const perKey = 100 // 50,000 events
	args := []string{"--batch-size", "500", "--shards", "32"}
	relays := []*proc.Process{
		relaytest.StartRelay(t, "relay-a", url, k, args...),
		relaytest.StartRelay(t, "relay-b", url, k, args...),
		relaytest.StartRelay(t, "relay-c", url, k, args...),
	}
	// Shard ownership is a session advisory lock per shard in class 0x0c0d0002.
	const shardLocks = `from pg_locks where locktype = 'advisory' and granted and classid = $1::bigint::oid
		and database = (select oid from pg_database where datname = current_database())`
	ownersOf := func() int { return count(`select count(distinct pid) `+shardLocks, int64(0x0c0d0002)) }
	ownedShards := func() int { return count(`select count(*) `+shardLocks, int64(0x0c0d0002)) }
	relaytest.WaitFor(t, 30*time.Second, "three relays own shards", func() error {
		if n := ownersOf(); n != 3 {
			return fmt.Errorf("%d relays own shards", n)
		}
		if n := ownedShards(); n != 32 {
			return fmt.Errorf("%d of 32 shards owned", n)
		}
		return nil
	})
	relaytest.Fill(t, pool, topic, keys, perKey, 0)
	relaytest.WaitFor(t, 60*time.Second, "publishing under way", func() error {
		if n := count("select count(*) from outbox where published_at is not null"); n < 5000 {
			return fmt.Errorf("%d published", n)
		}
		return nil
	})
	relays[0].Kill()
	relaytest.WaitFor(t, 10*time.Second, "the dead relay's shards taken over", func() error {
		if n := ownersOf(); n != 2 {
			return fmt.Errorf("%d relays own shards", n)
		}
		if n := ownedShards(); n != 32 {
			return fmt.Errorf("%d of 32 shards owned", n)
		}
		return nil
	})
	check := relaytest.NewChecker(t, k, topic)
	check.WaitAll(keys, perKey, 150*time.Second)
	relaytest.WaitAllPublished(t, pool, 30*time.Second)
	t.Logf("%s", check.Summary(keys, perKey))
	for _, r := range relays[1:] {
		err := r.Stop(syscall.SIGTERM, 30*time.Second)
		if err == nil {
			err = r.ExitErr()
		}
		if err != nil {
			t.Errorf("%s on SIGTERM: %v", r.Name(), err)
		}
	}
}

func TestOperatorCommandsExplainBadUsage(t *testing.T) {
	url, _ := newOutbox(t)
	bin := relaytest.BuildRelay(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"outbox"}, "missing command"},
		{[]string{"outbox", "skip", "1", "--database-url", url}, "skip needs --reason"},
		{[]string{"outbox", "retry", "x", "--database-url", url}, "want a positive integer"},
		{[]string{"outbox", "retry", "7", "--database-url", url}, "outbox row not found"},
		{[]string{"--shards", "0", "--database-url", url}, "must be at least 1"},
	}
	for _, c := range cases {
		out, err := runBin(bin, c.args...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("relay %v: %v %q, want an error containing %q", c.args, err, out, c.want)
		}
	}
	out, err := runBin(bin, "outbox", "parked", "--database-url", url)
	if err != nil || !strings.HasPrefix(out, "ID") {
		t.Errorf("relay outbox parked: %v %q", err, out)
	}
}

func runBin(bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := execCommand(ctx, bin, args...)
	if ctx.Err() != nil {
		return out, errors.New("timed out")
	}
	return out, err
}

func TestRelayMetricsEndpointShowsTheBacklogAndTheParkedRows(t *testing.T) {
	k := testkit.NewKafka(t)
	url, count := newOutbox(t)
	pool := testkit.Pool(t, url)
	topic := k.CreateTopic(t, "metrics", 2)
	stuck, others := relaytest.Keys(1)[0], relaytest.Keys(5)
	parked := relaytest.Append(t, pool, topic, stuck, 1, 0)
	relaytest.Append(t, pool, topic, stuck, 2, 0)
	relaytest.Append(t, pool, topic, stuck, 3, 0)
	// Parked by hand: how the relay parks a row is the publisher's test;
	// this one is about what an operator's scraper sees.
	if _, err := pool.Exec(context.Background(), `update outbox set attempts = 3, parked_at = now(),
		next_attempt_at = now(), last_error = 'MESSAGE_TOO_LARGE (set by the test)' where id = $1`, parked); err != nil {
		t.Fatal(err)
	}
	relaytest.Fill(t, pool, topic, others, 20, 0)
	p := relaytest.StartRelay(t, "relay-metrics", url, k, "--shards", "4", "--metrics-interval", "100ms")
	addr := relaytest.HTTPAddr(t, p, 30*time.Second)

	gauges := func(backlog, parked float64) func() error {
		return func() error {
			m, err := scrape("http://" + addr + "/metrics")
			if err != nil {
				return err
			}
			if m["concord_outbox_backlog_rows"] != backlog || m["concord_outbox_parked_rows"] != parked {
				return fmt.Errorf("backlog %v parked %v, want %v and %v", m["concord_outbox_backlog_rows"],
					m["concord_outbox_parked_rows"], backlog, parked)
			}
			if age := m["concord_outbox_oldest_pending_age_seconds"]; (backlog > 0) != (age > 0) {
				return fmt.Errorf("oldest pending age %v with a backlog of %v", age, backlog)
			}
			return nil
		}
	}
	// The other keys drain; the parked row and the two behind it stay.
	relaytest.WaitFor(t, 60*time.Second, "gauges: backlog 3, 1 parked", gauges(3, 1))
	if n := count("select count(*) from outbox where published_at is null"); n != 3 {
		t.Fatalf("%d rows pending, want 3", n)
	}
	out, err := runBin(relaytest.BuildRelay(t), "outbox", "skip", fmt.Sprint(parked), "--reason", "test", "--database-url", url)
	if err != nil {
		t.Fatalf("relay outbox skip: %v %s", err, out)
	}
	relaytest.WaitFor(t, 60*time.Second, "gauges: backlog 0, none parked", gauges(0, 0))
}

// scrape reads a Prometheus text exposition and returns its unlabelled
// samples by name.
func scrape(url string) (map[string]float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || strings.HasPrefix(line, "#") || strings.Contains(f[0], "{") {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return nil, fmt.Errorf("metric line %q: %w", line, err)
		}
		out[f[0]] = v
	}
	return out, nil
}
