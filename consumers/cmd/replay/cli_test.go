package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/infra/testkit"
)

// cli runs replay with the test broker and returns stdout, stderr and the
// error.
func cli(t *testing.T, k *testkit.Kafka, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), append([]string{"--kafka-brokers", strings.Join(k.Brokers, ",")}, args...), &out, &errOut)
	return out.String(), errOut.String(), err
}

func commitOffsets(t *testing.T, adm *kadm.Client, group, topic string, offs map[int32]int64) {
	t.Helper()
	var os kadm.Offsets
	for p, at := range offs {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if resp, err := adm.CommitOffsets(ctx, group, os); err != nil || resp.Error() != nil {
		t.Fatalf("commit %s: %v %v", group, err, resp.Error())
	}
}

func committedOf(t *testing.T, adm *kadm.Client, group string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) { out[o.Partition] = o.At })
	return out
}

// TestReplayDescribeListDeleteOffsetsAndSeveralGroups drives the other
// actions on the broker: --execute over two groups, --describe in its three
// forms, --list, and --delete-offsets.
func TestReplayDescribeListDeleteOffsetsAndSeveralGroups(t *testing.T) {
	f := newFixture(t, 2)
	f.produce(t, 10, false)
	adm := f.k.Admin(t)
	g1, g2 := testkit.UniqueName(t, "one"), testkit.UniqueName(t, "two")
	commitOffsets(t, adm, g1, f.topic, map[int32]int64{0: 1, 1: 1})
	commitOffsets(t, adm, g2, f.topic, map[int32]int64{0: 1})
	live := testkit.UniqueName(t, "live")
	startConsumerProtocolMember(t, f.k, live, f.topic)

	// Two groups reset in one run; a live one is refused and left alone.
	out, errOut, err := cli(t, f.k, "--group", g1, "--group", g2, "--group", live, "--topic", f.topic+":0", "--to-latest", "--execute")
	if err == nil || !strings.Contains(errOut, "Assignments can only be reset if the group '"+live+"' is inactive, but the current state is Stable.") {
		t.Fatalf("err %v, stderr:\n%s", err, errOut)
	}
	ends := map[int32]int64{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	listed, err := adm.ListEndOffsets(ctx, f.topic)
	if err != nil {
		t.Fatal(err)
	}
	listed.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	if c := committedOf(t, adm, g1); c[0] != ends[0] || c[1] != 1 {
		t.Errorf("group one after the reset: %v, want partition 0 at %d and 1 at 1\n%s", c, ends[0], out)
	}
	if c := committedOf(t, adm, g2); c[0] != ends[0] {
		t.Errorf("group two after the reset: %v, want partition 0 at %d", c, ends[0])
	}

	out, _, err = cli(t, f.k, "--describe", "--group", g1, "--group", live)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Consumer group '" + g1 + "' has no active members.", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID"} {
		if !strings.Contains(out, want) {
			t.Errorf("--describe lacks %q:\n%s", want, out)
		}
	}
	lag := ends[1] - 1
	if !containsRow(out, g1, f.topic, "1", "1", itoa(ends[1]), itoa(lag), "-", "-", "-") {
		t.Errorf("--describe has no row for %s partition 1 at 1 with lag %d:\n%s", g1, lag, out)
	}
	out, _, err = cli(t, f.k, "--describe", "--state", "--group", live, "--group", g2)
	if err != nil {
		t.Fatal(err)
	}
	if !containsRowPrefix(out, live) || !strings.Contains(out, "Stable") || !strings.Contains(out, "Empty") || !strings.Contains(out, "ASSIGNMENT-STRATEGY") {
		t.Errorf("--describe --state:\n%s", out)
	}
	out, _, err = cli(t, f.k, "--describe", "--members", "--group", live)
	if err != nil || !strings.Contains(out, "#PARTITIONS") || !containsRowPrefix(out, live) {
		t.Errorf("--describe --members: %v\n%s", err, out)
	}
	// --all-groups describes every group of the cluster, ours among them.
	out, _, err = cli(t, f.k, "--describe", "--state", "--all-groups")
	if err != nil || !containsRowPrefix(out, g1) || !containsRowPrefix(out, live) {
		t.Errorf("--describe --state --all-groups: %v, lacks %s or %s", err, g1, live)
	}
	// A dry run over --all-groups plans the inactive groups and refuses the
	// live one.
	out, errOut, err = cli(t, f.k, "--all-groups", "--topic", f.topic, "--to-earliest", "--export")
	if err == nil || !strings.Contains(errOut, "'"+live+"' is inactive") || !strings.Contains(out, `"`+g2+`","`+f.topic+`",0,0`) {
		t.Errorf("--all-groups dry run: %v\n%s\n%s", err, out, errOut)
	}
	out, _, err = cli(t, f.k, "--list")
	if err != nil || !strings.Contains("\n"+out, "\n"+g1+"\n") || !strings.Contains("\n"+out, "\n"+live+"\n") {
		t.Errorf("--list: %v, lacks %s or %s", err, g1, live)
	}

	out, _, err = cli(t, f.k, "--delete-offsets", "--group", g1, "--topic", f.topic+":1")
	if err != nil || !strings.Contains(out, "Successful") {
		t.Fatalf("--delete-offsets: %v\n%s", err, out)
	}
	if c := committedOf(t, adm, g1); c[0] != ends[0] || len(c) != 1 {
		t.Errorf("after --delete-offsets of partition 1: %v, want only partition 0", c)
	}
	// The broker refuses to delete the offsets of a topic a live member
	// subscribes to.
	out, _, err = cli(t, f.k, "--delete-offsets", "--group", live, "--topic", f.topic)
	if err == nil || !strings.Contains(out, "Error: ") {
		t.Errorf("--delete-offsets of a live group's topic: %v\n%s", err, out)
	}
}

func TestReplayCommandConfig(t *testing.T) {
	k := testkit.NewKafka(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The shared broker's own security (SASL_SSL with SCRAM and the
	// stack's CA on the local stack), as Apache's tools are given it.
	security := "security.protocol=PLAINTEXT\n"
	if props := k.ClientProperties(t); props != "" {
		b, err := os.ReadFile(props)
		if err != nil {
			t.Fatal(err)
		}
		security = string(b)
	}
	good := write("ok.properties", security+"client.id=replay-test\nlinger.ms=5\n")
	_, errOut, err := cli(t, k, "--list", "--command-config", good)
	if err != nil {
		t.Fatalf("--command-config with the broker's security:\n%s\n%v\n%s", security, err, errOut)
	}
	if !strings.Contains(errOut, "'linger.ms' was supplied but is not used") {
		t.Errorf("no warning for an unused property:\n%s", errOut)
	}
	for _, tc := range []struct{ content, want string }{
		{"security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n", "sasl.mechanism GSSAPI is not supported"},
		{"security.protocol=SSL\nssl.truststore.type=JKS\nssl.truststore.location=/x.jks\n", "ssl.truststore.type JKS is not supported"},
		{"sasl.mechanism=PLAIN\n", "security.protocol is not"},
	} {
		_, _, err := cli(t, k, "--list", "--command-config", write("bad.properties", tc.content))
		if err == nil || !errors.As(err, new(kit.UsageError)) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want a usage error saying %q", tc.content, err, tc.want)
		}
	}
	if _, _, err := cli(t, k, "--list", "--command-config", filepath.Join(dir, "missing")); err == nil || !errors.As(err, new(kit.UsageError)) {
		t.Errorf("a missing file: %v", err)
	}
}

func TestReplayTimeoutTakesMillisecondsOrADuration(t *testing.T) {
	var d millisOrDuration
	for in, want := range map[string]time.Duration{"5000": 5 * time.Second, "1500ms": 1500 * time.Millisecond, "2m": 2 * time.Minute} {
		if err := d.Set(in); err != nil || time.Duration(d) != want {
			t.Errorf("--timeout %s = %v (%v), want %v", in, time.Duration(d), err, want)
		}
	}
	for _, bad := range []string{"0", "-5", "soon"} {
		if err := d.Set(bad); err == nil {
			t.Errorf("--timeout %s: no error", bad)
		}
	}
}

func containsRow(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		if strings.Join(strings.Fields(line), " ") == strings.Join(fields, " ") {
			return true
		}
	}
	return false
}

func containsRowPrefix(out, first string) bool {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == first {
			return true
		}
	}
	return false
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
