package main_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/infra/testkit/proc"
	"github.com/concordhq/concord/relay/internal/relaytest"
	"github.com/concordhq/concord/relay/publisher"
)

// newWALOutbox is newOutbox on the package's private server. Creating a
// replication slot waits for every transaction running on its server to
// end; on the shared server the packages testing in parallel hold theirs
// open for seconds, longer than a test waits.
func newWALOutbox(t *testing.T) (string, func(q string, args ...any) int) {
	t.Helper()
	return newOutboxOn(t, testkit.PackagePostgresURL(t))
}

// walArgs are the flags of a WAL relay on a fresh slot and publication;
// the slot is dropped when the test ends (its database cannot be dropped
// while it exists).
func walArgs(t *testing.T, url string) (slot string, args []string) {
	t.Helper()
	slot = testkit.UniqueName(t, "slot")
	relaytest.DropSlotAtEnd(t, testkit.Pool(t, url), slot)
	return slot, []string{"--mode", "wal", "--slot", slot, "--publication", testkit.UniqueName(t, "pub"),
		"--slot-retry", "200ms", "--backoff-min", "50ms", "--backoff-max", "1s"}
}

// waitStreaming waits until relay p answers /readyz, which a WAL relay
// does once START_REPLICATION succeeded, and returns its ops address. The
// slot's active flag is not that sign: the walsender holds the slot while
// CREATE_REPLICATION_SLOT waits for a consistent point (seconds on a busy
// server, as it waits for the transactions running there), and rows
// committed before that point are not in the stream: the relay publishes
// them from the table, and concord_relay_wal_received_rows_total does not
// count them.
func waitStreaming(t *testing.T, p *proc.Process) string {
	t.Helper()
	addr := relaytest.HTTPAddr(t, p, 10*time.Second)
	if err := p.WaitReady(context.Background(), "http://"+addr+"/readyz", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return addr
}

// waitLogged waits until p's log holds line, for 30s at most.
func waitLogged(t *testing.T, p *proc.Process, line string) {
	t.Helper()
	if err := p.WaitFor(context.Background(), 30*time.Second, fmt.Sprintf("%s logging %q", p.Name(), line), func(context.Context) error {
		if !strings.Contains(p.Log(), line) {
			return errors.New("not logged yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// activePID is the walsender's pid of the slot's streaming instance, 0 when
// no instance streams from it.
func activePID(t *testing.T, count func(q string, args ...any) int, slot string) int {
	return count("select coalesce(max(active_pid), 0) from pg_replication_slots where slot_name = $1 and active", slot)
}

// The kill lands when the relay has published and deleted the first half
// of the rows and decoded the second half, whose records the producer
// still holds: the slot must not have confirmed them, so the next relay
// streams them again.
func TestWALRelayKilledMidStreamThenRestartedLosesNothingAndKeepsKeyOrder(t *testing.T) {
	k := testkit.NewKafka(t)
	url, count := newWALOutbox(t)
	pool := testkit.Pool(t, url)
	topic := k.CreateTopic(t, "walkill9", 4)
	_, args := walArgs(t, url)

	// A produce batch not yet full waits 2 s for more records before it
	// goes out (the rows below fill no batch).
	first := relaytest.StartRelay(t, "relay-1", url, k, append(args, "--linger", "2s")...)
	addr := waitStreaming(t, first)
	keys := relaytest.Keys(100)
	const half, perKey = 10, 20
	relaytest.FillSeqs(t, pool, topic, keys, 1, half, 0, 100) // 10 transactions
	relaytest.WaitFor(t, 60*time.Second, "the first half published (and deleted)", func() error {
		if n := count("select count(*) from outbox"); n != 0 {
			return fmt.Errorf("%d rows left", n)
		}
		return nil
	})
	relaytest.FillSeqs(t, pool, topic, keys, half+1, perKey, 0, 100)
	relaytest.WaitFor(t, 30*time.Second, "the second half decoded", func() error {
		m, err := scrape("http://" + addr + "/metrics")
		if err != nil {
			return err
		}
		if n := m["concord_relay_wal_received_rows_total"]; n != perKey*float64(len(keys)) {
			return fmt.Errorf("%v rows decoded", n)
		}
		return nil
	})
	first.Kill()
	check := relaytest.NewChecker(t, k, topic)
	check.ReadToEnd(30 * time.Second)
	inKafka := 0
	for _, seqs := range check.Seen() {
		for seq := range seqs {
			if seq > half {
				inKafka++
			}
		}
	}
	if inKafka == (perKey-half)*len(keys) {
		t.Fatal("every record of the second half was acknowledged before the kill; the test proves nothing")
	}
	t.Logf("killed with %d of the second half's %d records in Kafka", inKafka, (perKey-half)*len(keys))
	restartAndCheck(t, url, k, topic, keys, perKey, args)
}

func TestWALRelayStandbyTakesTheSlotWithinSecondsWhenTheActiveOneDies(t *testing.T) {
	k := testkit.NewKafka(t)
	url, count := newWALOutbox(t)
	pool := testkit.Pool(t, url)
	wr, topic := relaytest.WALTopic(t, k, 2, nil)
	slot, args := walArgs(t, url)

	a := relaytest.StartRelay(t, "relay-a", url, k, args...)
	waitStreaming(t, a)
	pidA := activePID(t, count, slot)
	if pidA == 0 {
		t.Fatalf("relay-a is ready but slot %s is not active", slot)
	}
	b := relaytest.StartRelay(t, "relay-b", url, k, args...)
	// The slot is exclusive: b keeps asking and is refused while a lives.
	waitLogged(t, b, "is active for PID")
	if pid := activePID(t, count, slot); pid != pidA {
		t.Fatalf("slot streamed by pid %d, want relay-a's walsender %d", pid, pidA)
	}
	keys := relaytest.Keys(5)
	relaytest.AppendEach(t, pool, wr, keys, 1)
	check := relaytest.NewChecker(t, k, topic)
	check.WaitAll(keys, 1, 30*time.Second)

	a.Kill()
	killed := time.Now()
	relaytest.AppendEach(t, pool, wr, keys, 2)
	check.WaitAll(keys, 2, 30*time.Second)
	took := time.Since(killed)
	t.Logf("relay-b took the slot and published the rows appended after the kill %s after relay-a died", took.Round(time.Millisecond))
	if took > 10*time.Second {
		t.Fatalf("takeover took %s, want within 10s", took)
	}
	if errs := check.Errors(); len(errs) > 0 {
		t.Fatal(errs)
	}
}

func TestWALRelayKilledWhileTheBrokerIsDownConfirmsNothingUnacknowledgedAndLosesNothing(t *testing.T) {
	pk := testkit.NewPrivateKafka(t)
	k := pk.Kafka()
	url, count := newWALOutbox(t)
	pool := testkit.Pool(t, url)
	wr, topic := relaytest.WALTopic(t, k, 2, nil)
	slot, args := walArgs(t, url)
	args = append(args, "--delivery-timeout", "2m")

	first := relaytest.StartRelay(t, "relay-1", url, k, args...)
	// Streaming, not just holding the slot: the first five rows must come
	// through the stream for the count below to reach 25.
	addr := waitStreaming(t, first)
	keys := relaytest.Keys(5)
	relaytest.AppendEach(t, pool, wr, keys, 1)
	check := relaytest.NewChecker(t, k, topic)
	check.WaitAll(keys, 1, 60*time.Second)

	pk.Stop(t)
	// bound is at or past the end of the first transaction appended while
	// the broker is down: the slot must not confirm it, as its record has
	// no ack.
	var bound string
	for seq := 2; seq <= 5; seq++ {
		for _, key := range keys {
			if _, err := relaytest.TryAppendWith(pool, wr, key, seq, 0); err != nil {
				t.Fatal(err)
			}
			if bound == "" {
				if err := pool.QueryRow(context.Background(), "select pg_current_wal_insert_lsn()::text").Scan(&bound); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	var after string
	if err := pool.QueryRow(context.Background(), "select pg_current_wal_lsn()::text").Scan(&after); err != nil {
		t.Fatal(err)
	}
	relaytest.WaitFor(t, 30*time.Second, "the relay received the rows appended while the broker is down", func() error {
		if count("select count(*) from pg_stat_replication where pid = $1 and sent_lsn >= $2::pg_lsn", activePID(t, count, slot), after) != 1 {
			return fmt.Errorf("walsender has not sent up to %s", after)
		}
		return nil
	})
	relaytest.WaitFor(t, 30*time.Second, "the relay decoded the rows appended while the broker is down", func() error {
		m, err := scrape("http://" + addr + "/metrics")
		if err != nil {
			return err
		}
		if n := m["concord_relay_wal_received_rows_total"]; n != 25 {
			return fmt.Errorf("%v of 25 rows decoded", n)
		}
		return nil
	})
	// Fifteen status intervals: the slot must not confirm a row whose
	// record has no ack, nor the relay delete it.
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); <-time.After(100 * time.Millisecond) {
		if n := count("select count(*) from pg_replication_slots where slot_name = $1 and confirmed_flush_lsn >= $2::pg_lsn", slot, bound); n != 0 {
			t.Fatalf("slot %s confirmed %s, a row whose record has no ack, while the broker was down", slot, bound)
		}
		if n := count("select count(*) from outbox"); n != 20 {
			t.Fatalf("%d outbox rows while the broker is down, want the 20 appended meanwhile: an unacknowledged row was deleted", n)
		}
	}
	first.Kill()
	pk.Start(t)
	relaytest.StartRelay(t, "relay-2", url, k, args...)
	check.WaitAll(keys, 5, 90*time.Second)
	if errs := check.Errors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	relaytest.WaitAllDeleted(t, pool, 30*time.Second)
}

func TestWALModeFlagsExplainBadUsage(t *testing.T) {
	url, _ := newOutbox(t)
	bin := relaytest.BuildRelay(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode", "wat", "--database-url", url}, `--mode "wat": want poll or wal`},
		{[]string{"--mode", "wal", "--slot", "Bad-Slot", "--database-url", url}, `slot "Bad-Slot"`},
	} {
		out, err := runBin(bin, c.args...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("relay %v: %v %q, want an error containing %q", c.args, err, out, c.want)
		}
	}
	out, _ := runBin(bin, "--help")
	for _, flag := range []string{"--mode", "--slot", "--publication", "--status-interval", "--slot-retry"} {
		if !strings.Contains(out, flag) {
			t.Errorf("relay --help does not explain %s:\n%s", flag, out)
		}
	}
}

// WAL mode produces each transaction's rows as the stream hands them over,
// so it lingers a millisecond unless told otherwise (publisher.DefaultWALLinger);
// poll mode produces whole batches and keeps 0. The relay logs the linger
// it runs with.
func TestEachModeRunsWithItsOwnDefaultLinger(t *testing.T) {
	k := testkit.NewKafka(t)
	url, _ := newWALOutbox(t)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"wal", nil, "linger=" + publisher.DefaultWALLinger.String()},
		{"wal-told", []string{"--linger", "0"}, "linger=0s"},
		{"poll", []string{"--mode", "poll"}, "linger=0s"},
	} {
		args := c.args
		if c.name != "poll" {
			_, wal := walArgs(t, url)
			args = append(wal, args...)
		}
		p := relaytest.StartRelay(t, "relay-"+c.name, url, k, args...)
		waitLogged(t, p, "relay running")
		if !strings.Contains(p.Log(), c.want) {
			t.Errorf("relay %v logged no %q:\n%s", args, c.want, p.LogTail(20))
		}
		if err := p.Stop(syscall.SIGTERM, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
}
