package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/infra/testkit"
)

// resetCase is one row of the comparison table: the options given to both
// tools (Apache's also get --bootstrap-server and --reset-offsets, both get
// --dry-run --export). extension marks a documented difference: a form
// replay accepts and Apache's tool refuses.
type resetCase struct {
	name      string
	args      []string
	extension bool
}

// outcome is what a tool answered: the plan as sorted "group,topic,
// partition,offset" lines, and whether it refused (an error for any group).
type outcome struct {
	refused bool
	rows    []string
	detail  string
}

func (o outcome) String() string {
	if o.refused {
		return fmt.Sprintf("refused (%s) %v", strings.TrimSpace(o.detail), o.rows)
	}
	return fmt.Sprint(o.rows)
}

func (o outcome) same(p outcome) bool {
	return o.refused == p.refused && strings.Join(o.rows, "\n") == strings.Join(p.rows, "\n")
}

// TestReplayPlansAgreeWithApacheConsumerGroupCommand runs Apache Kafka's own
// kafka-consumer-groups.sh (ConsumerGroupCommand from the kafka-tools
// 4.1.1 jar) and replay over a table of reset cases on the same topics and
// groups and compares the plans: every strategy, topic and partition
// selections, several groups, a live consumer-protocol group, --to-datetime
// and --by-duration forms, and --from-file plans exported by one tool and
// read by the other.
func TestReplayPlansAgreeWithApacheConsumerGroupCommand(t *testing.T) {
	cp := os.Getenv("CONCORD_KAFKA_CLASSPATH")
	if cp == "" {
		t.Fatal("CONCORD_KAFKA_CLASSPATH is not set: run the tests with `make test` (infra/local/up resolves the Kafka jars and sets it)")
	}
	k := testkit.NewKafka(t)
	brokers := strings.Join(k.Brokers, ",")
	A := k.CreateTopic(t, "a", 3)
	B := k.CreateTopic(t, "b", 2)

	// Partition p of A holds 30 records: 20 at base + i*50ms + p*7ms, then
	// 10 at base + 1s + (i-20)*25min + p*7ms, so millisecond and
	// half-hour readings of a time land on different offsets. B:0 holds 10
	// records, B:1 none. A:2 starts at 5 after a deletion.
	now := time.Now()
	base := now.Add(-6 * time.Hour).Truncate(time.Hour)
	stamp := func(i int, p int32) time.Time {
		if i < 20 {
			return base.Add(time.Duration(i)*50*time.Millisecond + time.Duration(p)*7*time.Millisecond)
		}
		return base.Add(time.Second + time.Duration(i-20)*25*time.Minute + time.Duration(p)*7*time.Millisecond)
	}
	var recs []*kgo.Record
	for p := int32(0); p < 3; p++ {
		for i := 0; i < 30; i++ {
			recs = append(recs, &kgo.Record{Topic: A, Partition: p, Timestamp: stamp(i, p), Value: []byte("v")})
		}
	}
	for i := 0; i < 10; i++ {
		recs = append(recs, &kgo.Record{Topic: B, Partition: 0, Timestamp: stamp(i+20, 0), Value: []byte("v")})
	}
	cl := k.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := k.Admin(t)
	var del kadm.Offsets
	del.Add(kadm.Offset{Topic: A, Partition: 2, At: 5})
	if resp, err := adm.DeleteRecords(ctx, del); err != nil || resp.Error() != nil {
		t.Fatalf("delete records: %v %v", err, resp.Error())
	}
	commit := func(group string, offs map[string]map[int32]int64) {
		var os kadm.Offsets
		for topic, ps := range offs {
			for p, at := range ps {
				os.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
			}
		}
		if resp, err := adm.CommitOffsets(ctx, group, os); err != nil || resp.Error() != nil {
			t.Fatalf("commit %s: %v %v", group, err, resp.Error())
		}
	}
	full := testkit.UniqueName(t, "full")
	part := testkit.UniqueName(t, "part")
	none := testkit.UniqueName(t, "none")
	live := testkit.UniqueName(t, "live")
	commit(full, map[string]map[int32]int64{A: {0: 10, 1: 25, 2: 7}, B: {0: 3}})
	commit(part, map[string]map[int32]int64{A: {0: 2}})
	startConsumerProtocolMember(t, k, live, A)

	// X lies between two records of the half-hour region on every
	// partition (60 min after its start; records at 50 and 75 min).
	x := base.Add(time.Second + 60*time.Minute)
	at := func(layout string, zone *time.Location) string { return x.In(zone).Format(layout) }
	fixed := func(sign string, h, m int) *time.Location {
		if sign == "-" {
			return time.FixedZone("", -(h*60+m)*60)
		}
		return time.FixedZone("", (h*60+m)*60)
	}
	utc := time.UTC
	ms := func(frac string) string { return base.Format("2006-01-02T15:04:05") + frac }
	minsAgo := func(t time.Time) int { return int(now.Sub(t).Round(time.Minute) / time.Minute) }
	d := minsAgo(x)

	g := func(names ...string) []string {
		var out []string
		for _, n := range names {
			out = append(out, "--group", n)
		}
		return out
	}
	c := func(name string, args ...[]string) resetCase {
		var all []string
		for _, a := range args {
			all = append(all, a...)
		}
		return resetCase{name: name, args: all}
	}
	s := func(a ...string) []string { return a }
	topicA := s("--topic", A)
	cases := []resetCase{
		c("all-topics to-earliest", g(full), s("--all-topics", "--to-earliest")),
		c("all-topics to-latest", g(full), s("--all-topics", "--to-latest")),
		c("all-topics to-current", g(full), s("--all-topics", "--to-current")),
		c("to-current with commits", g(full), topicA, s("--to-current")),
		c("to-current without some commits", g(part), topicA, s("--to-current")),
		c("to-offset inside", g(full), topicA, s("--to-offset", "8")),
		c("to-offset above the end", g(full), topicA, s("--to-offset", "1000")),
		c("to-offset below the start", g(full), topicA, s("--to-offset", "0")),
		c("shift-by back", g(full), topicA, s("--shift-by", "-3")),
		c("shift-by far back", g(full), topicA, s("--shift-by", "-100")),
		c("shift-by far forward", g(full), topicA, s("--shift-by", "100")),
		c("shift-by without a commit", g(part), topicA, s("--shift-by", "1")),
		c("partitions of a topic", g(full), s("--topic", A+":0,2", "--to-earliest")),
		c("a partition and a topic", g(full), s("--topic", A+":1", "--topic", B, "--to-latest")),
		c("partitions of two topics", g(full), s("--topic", A+":2,0", "--topic", B+":0", "--to-offset", "6")),
		c("a topic and one of its partitions", g(full), s("--topic", A, "--topic", A+":1", "--to-earliest")),
		c("one of its partitions and the topic", g(full), s("--topic", A+":1", "--topic", A, "--to-earliest")),
		c("a partition twice", g(full), s("--topic", A+":1,1", "--to-earliest")),
		c("a topic twice", g(full), s("--topic", A, "--topic", A, "--to-earliest")),
		c("a partition that does not exist", g(full), s("--topic", A+":7", "--to-earliest", "--timeout", "1000")),
		c("a topic that does not exist", g(full), s("--topic", A+"-missing", "--to-earliest", "--timeout", "1000")),
		c("two groups", g(full, part), s("--all-topics", "--to-earliest")),
		c("two groups shift-by, one without a commit", g(full, part), topicA, s("--shift-by", "-1")),
		c("an unknown group", g(none), topicA, s("--to-earliest")),
		c("an unknown group, all topics", g(none), s("--all-topics", "--to-earliest")),
		c("a live consumer-protocol group", g(live), topicA, s("--to-earliest")),
		c("a live group and an inactive one", g(live, full), topicA, s("--to-earliest")),
		c("to-datetime without a zone", g(full), topicA, s("--to-datetime", at("2006-01-02T15:04:05.000", utc))),
		c("to-datetime Z", g(full), topicA, s("--to-datetime", at("2006-01-02T15:04:05.000Z", utc))),
		c("to-datetime +05:30", g(full), topicA, s("--to-datetime", at("2006-01-02T15:04:05.000-07:00", fixed("+", 5, 30)))),
		c("to-datetime +0530", g(full), topicA, s("--to-datetime", at("2006-01-02T15:04:05.000-0700", fixed("+", 5, 30)))),
		c("to-datetime +05", g(full), topicA, s("--to-datetime", at("2006-01-02T15:04:05.000-07", fixed("+", 5, 0)))),
		c("to-datetime -0800", g(full), topicA, s("--to-datetime", at("2006-01-02T15:04:05.000-0700", fixed("-", 8, 0)))),
		c("to-datetime -0330", g(full), topicA, s("--to-datetime", at("2006-01-02T15:04:05.000-0700", fixed("-", 3, 30)))),
		c("to-datetime unpadded", g(full), topicA, s("--to-datetime", at("2006-1-2T15:4:5.0", utc))),
		c("to-datetime text after the zone", g(full), topicA, s("--to-datetime", at("2006-01-02T15:04:05.000Zjunk", utc))),
		c("to-datetime a blank before the zone", g(full), topicA, s("--to-datetime", at("2006-01-02T15:04:05.000 -07:00", fixed("+", 1, 0)))),
		c("to-datetime .5", g(full), topicA, s("--to-datetime", ms(".5"))),
		c("to-datetime .50", g(full), topicA, s("--to-datetime", ms(".50"))),
		c("to-datetime .05", g(full), topicA, s("--to-datetime", ms(".05"))),
		c("to-datetime .500", g(full), topicA, s("--to-datetime", ms(".500"))),
		c("to-datetime .99", g(full), topicA, s("--to-datetime", ms(".99"))),
		c("to-datetime long ago", g(full), topicA, s("--to-datetime", "2000-01-01T00:00:00.000")),
		c("to-datetime far ahead", g(full), topicA, s("--to-datetime", "2099-01-01T00:00:00.000")),
		c("to-datetime without milliseconds", g(full), topicA, s("--to-datetime", at("2006-01-02T15:04:05", utc))),
		c("to-datetime a day that does not exist", g(full), topicA, s("--to-datetime", "2026-02-29T00:00:00.000")),
		c("by-duration minutes", g(full), topicA, s("--by-duration", fmt.Sprintf("PT%dM", d))),
		c("by-duration hours and minutes", g(full), topicA, s("--by-duration", fmt.Sprintf("PT%dH%dM", d/60, d%60))),
		c("by-duration days", g(full), topicA, s("--by-duration", fmt.Sprintf("P0DT%dH%dM", d/60, d%60))),
		c("by-duration lower case", g(full), topicA, s("--by-duration", fmt.Sprintf("pt%dm", d))),
		c("by-duration seconds", g(full), topicA, s("--by-duration", fmt.Sprintf("PT%d.5S", d*60))),
		c("by-duration negative", g(full), topicA, s("--by-duration", "-PT5M")),
		c("by-duration a day", g(full), topicA, s("--by-duration", "P1D")),
		c("by-duration malformed", g(full), topicA, s("--by-duration", "PT")),
		{name: "to-datetime RFC 3339 without milliseconds", args: append(append(g(full), topicA...), "--to-datetime", at(time.RFC3339, utc)), extension: true},
		{name: "by-duration as a Go duration", args: append(append(g(full), topicA...), "--by-duration", fmt.Sprintf("%dm", d)), extension: true},
	}

	dir := t.TempDir()
	// Phase 1 exports plans; phase 2 feeds them to --from-file, each file
	// read by both tools: the file of one tool is read by the other.
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	apache1 := runApache(t, cp, k, cases)
	replay1 := make([]outcome, len(cases))
	var apacheSingleCSV, replayMultiCSV string
	for i, tc := range cases {
		var csv string
		replay1[i], csv = runReplayExport(brokers, tc.args)
		if tc.name == "to-offset inside" {
			apacheSingleCSV = apache1[i].detail
		}
		if tc.name == "two groups" {
			replayMultiCSV = csv
		}
	}
	fromApache := write("apache-single.csv", apacheSingleCSV)
	fromReplay := write("replay-multi.csv", replayMultiCSV)
	clamped := write("clamped.csv", fmt.Sprintf("%s,0,1000\n%s,2,0\n%s,1,4\n", A, A, B))
	negative := write("negative.csv", fmt.Sprintf("%s,0,1\n%s,1,-4\n", A, B))
	fourColumns := write("four.csv", fmt.Sprintf("%s,%s,0,4\n%s,%s,1,5\n%s,%s,0,6\n", full, A, full, A, part, A))
	fileCases := []resetCase{
		c("from-file exported by Apache, one group", g(full), s("--from-file", fromApache)),
		c("from-file exported by replay, two groups", g(full, part), s("--from-file", fromReplay)),
		c("from-file out of the log is clamped", g(full), s("--from-file", clamped)),
		c("from-file with a group column, one group", g(full), s("--from-file", fourColumns)),
		c("from-file with a negative offset", g(full), s("--from-file", negative)),
		c("from-file of another group", g(part), s("--from-file", clamped)),
	}
	apache2 := runApache(t, cp, k, fileCases)
	replay2 := make([]outcome, len(fileCases))
	for i, tc := range fileCases {
		replay2[i], _ = runReplayExport(brokers, tc.args)
	}
	// A plan read back from a file is the plan that was exported.
	byName := func(name string) int {
		for i, tc := range cases {
			if tc.name == name {
				return i
			}
		}
		t.Fatalf("no case %q", name)
		return -1
	}
	if got, want := replay2[0], apache1[byName("to-offset inside")]; !got.same(want) {
		t.Errorf("replay --from-file of Apache's export: %v, Apache exported %v", got, want)
	}
	if got, want := apache2[1], replay1[byName("two groups")]; !got.same(want) {
		t.Errorf("Apache --from-file of replay's export: %v, replay exported %v", got, want)
	}

	all := append(cases, fileCases...)
	apache := append(apache1, apache2...)
	replays := append(replay1, replay2...)
	agree, parity, extensions := 0, 0, 0
	for i, tc := range all {
		a, r := apache[i], replays[i]
		if tc.extension {
			extensions++
			if !a.refused || r.refused || len(r.rows) == 0 {
				t.Errorf("%s (documented extension): Apache %v, replay %v; want Apache to refuse and replay to plan", tc.name, a, r)
			}
			continue
		}
		parity++
		if a.same(r) {
			agree++
			continue
		}
		t.Errorf("%s %q:\n  Apache: %v\n  replay: %v", tc.name, tc.args, a, r)
	}
	t.Logf("replay agrees with Apache's ConsumerGroupCommand 4.1.1 in %d of %d cases (plus %d documented extensions that Apache refuses)", agree, parity, extensions)
}

// runApache runs the cases through Apache's ConsumerGroupCommand in one JVM
// (testdata/ConsumerGroupCommandRunner.java) and reads its plans. An
// outcome's detail holds the exported CSV, or the error.
func runApache(t *testing.T, cp string, k *testkit.Kafka, cases []resetCase) []outcome {
	t.Helper()
	conn := []string{"--bootstrap-server", strings.Join(k.Brokers, ",")}
	if props := k.ClientProperties(t); props != "" {
		conn = append(conn, "--command-config", props)
	}
	var in strings.Builder
	for _, tc := range cases {
		args := append(append(slices.Clone(conn), "--reset-offsets", "--dry-run", "--export"), tc.args...)
		in.WriteString(strings.Join(args, "\t") + "\n")
	}
	cmd := exec.Command("java", "-cp", cp, "testdata/ConsumerGroupCommandRunner.java")
	cmd.Stdin = strings.NewReader(in.String())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("java ConsumerGroupCommandRunner: %v\n%s", err, stderr.String())
	}
	var outcomes []outcome
	var cur *outcome
	var csv strings.Builder
	inStderr := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "@@case "):
			cur = &outcome{refused: !strings.HasSuffix(line, " exit 0")}
			csv.Reset()
			inStderr = false
		case line == "@@stderr":
			inStderr = true
		case line == "@@end":
			if !cur.refused {
				cur.detail = csv.String() // the exported CSV
			}
			outcomes = append(outcomes, *cur)
		case inStderr:
			if cur.refused && cur.detail == "" && strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "WARN") {
				cur.detail = line
			}
		case strings.HasPrefix(line, "Error: "):
			cur.refused = true
			cur.detail = line
		case strings.HasPrefix(line, "Warn: "):
		case strings.TrimSpace(line) != "":
			csv.WriteString(line + "\n")
			cur.rows = append(cur.rows, line)
		}
	}
	if len(outcomes) != len(cases) {
		t.Fatalf("%d outcomes from Apache's tool for %d cases:\n%s\n%s", len(outcomes), len(cases), out, stderr.String())
	}
	// Apache writes "topic,partition,offset" for a single group: name the
	// group as replay's multi-group lines do, to compare like with like.
	for i, tc := range cases {
		outcomes[i].rows = withGroup(outcomes[i].rows, tc.args)
	}
	return outcomes
}

// runReplayExport runs replay on the case and returns its outcome and the
// CSV it printed.
func runReplayExport(brokers string, args []string) (outcome, string) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), append([]string{"--kafka-brokers", brokers, "--dry-run", "--export"}, args...), &out, &errOut)
	o := outcome{refused: err != nil}
	if err != nil {
		o.detail = err.Error()
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.TrimSpace(line) != "" {
			o.rows = append(o.rows, line)
		}
	}
	o.rows = withGroup(o.rows, args)
	sort.Strings(o.rows)
	return o, out.String()
}

// withGroup prefixes three-column lines with the case's single group.
func withGroup(rows, args []string) []string {
	var groups []string
	for i, a := range args {
		if a == "--group" && i+1 < len(args) {
			groups = append(groups, args[i+1])
		}
	}
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		if strings.Count(r, ",") == 2 && len(groups) == 1 {
			r = groups[0] + "," + r
		}
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// startConsumerProtocolMember keeps a KIP-848 member of group polling topic
// until the test ends and waits until the group is Stable.
func startConsumerProtocolMember(t *testing.T, k *testkit.Kafka, group, topic string) {
	t.Helper()
	cl := k.Client(t, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ServerSideBalancer(),
		kgo.Balancers(kgo.RangeBalancer()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	stop := make(chan struct{})
	polled := make(chan struct{})
	t.Cleanup(func() { close(stop); <-polled })
	go func() {
		defer close(polled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			cl.PollFetches(ctx)
			cancel()
		}
	}()
	adm := k.Admin(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		d, err := adm.DescribeConsumerGroups(ctx, group)
		cancel()
		if err == nil && strings.EqualFold(d[group].State, "stable") && len(d[group].Members) == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the consumer-protocol group %s did not become stable: %v %+v", group, err, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
