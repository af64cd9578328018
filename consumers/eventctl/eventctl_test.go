package eventctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/concordhq/concord/consumers/eventctl"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/schemas"
)

// example is one of the catalog's example events.
type example struct {
	file    string
	typ     string
	version int
	id      string
	key     string
	body    []byte
}

func examples(t *testing.T, cat *schemas.Catalog) []example {
	t.Helper()
	names, err := fs.Glob(cat.Files(), "events/*/examples/*.json")
	if err != nil || len(names) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	var out []example
	for _, n := range names {
		b, err := fs.ReadFile(cat.Files(), n)
		if err != nil {
			t.Fatal(err)
		}
		env, err := schemas.DecodeEnvelope(b)
		if err != nil {
			t.Fatal(err)
		}
		e, _ := cat.Lookup(env.EventType)
		key, err := e.PartitionKey(env.Data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, example{file: n, typ: env.EventType, version: env.EventVersion, id: env.EventID, key: key, body: b})
	}
	return out
}

// avroIDs gives every Avro schema version of the catalog an id, as a
// registry would.
func avroIDs(cat *schemas.Catalog) string {
	var ids []string
	for i, typ := range cat.Types() {
		e, _ := cat.Lookup(typ)
		if e.Encoding != schemas.EncodingAvro {
			continue
		}
		for _, v := range e.Versions {
			ids = append(ids, fmt.Sprintf("%s/v%d=%d", typ, v, 1000+10*i+v))
		}
	}
	return strings.Join(ids, ",")
}

func run(t *testing.T, k *testkit.Kafka, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	// args[0] is the command; the Kafka flags follow it.
	args = append([]string{args[0], "--kafka-brokers", strings.Join(k.Brokers, ",")}, args[1:]...)
	if args[0] == "tail" {
		// Every offset these tests read holds a record: a fetch slowed by a
		// loaded machine must not pass for the end.
		args = append(args, "--idle-end", "30s")
	}
	err := eventctl.Run(ctx, args, &out, &out)
	return out.String(), err
}

// catalogTopics creates every topic of the catalog under a fresh prefix.
func catalogTopics(t *testing.T, k *testkit.Kafka, cat *schemas.Catalog) string {
	t.Helper()
	prefix := testkit.UniqueName(t, "evctl") + "."
	adm := k.Admin(t)
	seen := map[string]bool{}
	var names []string
	for _, typ := range cat.Types() {
		e, _ := cat.Lookup(typ)
		if seen[e.Topic] {
			continue
		}
		seen[e.Topic] = true
		names = append(names, prefix+e.Topic)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		resp, err := adm.CreateTopic(ctx, 3, 1, nil, prefix+e.Topic)
		cancel()
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create %s: %v", prefix+e.Topic, err)
		}
		name := prefix + e.Topic
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, _ = adm.DeleteTopics(ctx, name)
		})
	}
	// CreateTopics answers before every partition has a leader; a produce
	// in between is refused as UNKNOWN_TOPIC_OR_PARTITION.
	testkit.Eventually(t, 30*time.Second, "every partition of the new topics led", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		md, err := adm.Metadata(ctx, names...)
		if err != nil {
			return err
		}
		for _, name := range names {
			td, ok := md.Topics[name]
			if !ok || td.Err != nil || len(td.Partitions) != 3 {
				return fmt.Errorf("%s: %v", name, td.Err)
			}
			for _, p := range td.Partitions {
				if p.Leader < 0 || p.Err != nil {
					return fmt.Errorf("%s/%d: leader %d, %v", name, p.Partition, p.Leader, p.Err)
				}
			}
		}
		return nil
	})
	return prefix
}

type line struct {
	Topic     string          `json:"topic"`
	Partition int32           `json:"partition"`
	Offset    int64           `json:"offset"`
	Key       string          `json:"key"`
	Event     json.RawMessage `json:"event"`
	Error     string          `json:"error"`
}

func parseLines(t *testing.T, out string) []line {
	t.Helper()
	var ls []line
	for _, s := range strings.Split(strings.TrimSpace(out), "\n") {
		if s == "" {
			continue
		}
		var l line
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("not a JSON line: %q: %v", s, err)
		}
		ls = append(ls, l)
	}
	return ls
}

// Every example of every catalog type goes out through produce (Avro
// types Confluent-framed) and comes back decoded by tail; --type and
// --key keep only what they name.
func TestProduceEveryExampleAndTailDecodesEach(t *testing.T) {
	k := testkit.NewKafka(t)
	cat := schemas.MustDefault()
	prefix := catalogTopics(t, k, cat)
	ids := avroIDs(cat)
	exs := examples(t, cat)
	dir := t.TempDir()
	var all bytes.Buffer
	for _, e := range exs {
		all.Write(e.body)
		all.WriteByte('\n')
	}
	file := filepath.Join(dir, "all.json")
	if err := os.WriteFile(file, all.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, k, "produce", file, "--topic-prefix", prefix, "--avro-ids", ids)
	if err != nil {
		t.Fatalf("produce: %v\n%s", err, out)
	}
	if n := strings.Count(out, "produced "); n != len(exs) {
		t.Fatalf("produced %d of %d examples:\n%s", n, len(exs), out)
	}

	// The Avro types travel Confluent-framed: magic byte 0, then the id.
	avroTopic := ""
	for _, typ := range cat.Types() {
		if e, _ := cat.Lookup(typ); e.Encoding == schemas.EncodingAvro {
			avroTopic = prefix + e.Topic
		}
	}
	raw := k.Client(t, kgo.ConsumeTopics(avroTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fetches := raw.PollRecords(ctx, 1)
	if fetches.NumRecords() == 0 || fetches.Records()[0].Value[0] != 0 {
		t.Fatalf("no Confluent-framed record on %s: %v", avroTopic, fetches.Errors())
	}

	out, err = run(t, k, "tail", "--from", "beginning", "--topic-prefix", prefix, "--avro-ids", ids, "--format", "json")
	if err != nil {
		t.Fatalf("tail: %v\n%s", err, out)
	}
	got := map[string]int{}
	for _, l := range parseLines(t, out) {
		if l.Error != "" {
			t.Errorf("%s/%d@%d: %s", l.Topic, l.Partition, l.Offset, l.Error)
			continue
		}
		env, err := schemas.DecodeEnvelope(l.Event)
		if err != nil {
			t.Fatal(err)
		}
		got[fmt.Sprintf("%s v%d %s %s", env.EventType, env.EventVersion, env.EventID, l.Key)]++
	}
	for _, e := range exs {
		k := fmt.Sprintf("%s v%d %s %s", e.typ, e.version, e.id, e.key)
		if got[k] == 0 {
			t.Errorf("tail did not decode %s (%s)", e.file, k)
			continue
		}
		got[k]--
	}
	for k, n := range got {
		if n != 0 {
			t.Errorf("tail printed %s %d more times than produced", k, n)
		}
	}

	// --type keeps only that type; --key only that key; text lines say
	// type vN and id.
	want := exs[0]
	out, err = run(t, k, "tail", "--from", "beginning", "--topic-prefix", prefix, "--avro-ids", ids, "--type", want.typ)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range exs {
		if e.typ == want.typ {
			n++
		}
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != n {
		t.Errorf("--type %s: %d lines, want %d:\n%s", want.typ, len(lines), n, out)
	}
	for _, l := range lines {
		if !strings.Contains(l, " "+want.typ+" v") {
			t.Errorf("--type %s printed %q", want.typ, l)
		}
	}
	out, err = run(t, k, "tail", "--from", "beginning", "--topic-prefix", prefix, "--avro-ids", ids, "--key", want.key)
	if err != nil {
		t.Fatal(err)
	}
	n = 0
	for _, e := range exs {
		if e.key == want.key {
			n++
		}
	}
	lines = strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != n || !strings.Contains(out, fmt.Sprintf("%s v%d %s ", want.typ, want.version, want.id)) {
		t.Errorf("--key %s: %d lines, want %d with %s:\n%s", want.key, len(lines), n, want.id, out)
	}
	for _, l := range lines {
		if !strings.Contains(l, " "+want.key+" ") {
			t.Errorf("--key %s printed %q", want.key, l)
		}
	}
}

// A record that is not an event prints an error line, and tail goes on
// to the records after it.
func TestTailPrintsAnErrorLineForAMalformedRecordAndContinues(t *testing.T) {
	k := testkit.NewKafka(t)
	cat := schemas.MustDefault()
	topic := k.CreateTopic(t, "evctl-bad", 1)
	exs := examples(t, cat)
	var good []byte
	for _, e := range exs {
		if e.typ == "order.created" {
			good = e.body
		}
	}
	cl := k.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	invalid := bytes.Replace(good, []byte(`"currency": "EUR"`), []byte(`"currency": 978`), 1)
	for _, v := range [][]byte{good, []byte("{not json"), {0, 0, 0, 0x30, 0x39, 2, 4}, invalid, good} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("k"), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	out, err := run(t, k, "tail", "--topic", topic, "--from", "beginning")
	if err != nil {
		t.Fatalf("tail: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines, want 5:\n%s", len(lines), out)
	}
	for i, want := range []string{" order.created v3 ", "ERROR decode envelope", "ERROR decode Avro: unknown schema id 12345", "ERROR invalid event: order.created v3: /data/currency", " order.created v3 "} {
		if !strings.Contains(lines[i], want) || !strings.Contains(lines[i], fmt.Sprintf("%s/0@%d k ", topic, i)) {
			t.Errorf("line %d = %q, want %q at offset %d", i, lines[i], want, i)
		}
	}
}

// tail starts at an offset (of every partition or of listed ones) or at
// a time, and stops at the end it found without --follow.
func TestTailStartsAtAnOffsetOrATime(t *testing.T) {
	k := testkit.NewKafka(t)
	cat := schemas.MustDefault()
	topic := k.CreateTopic(t, "evctl-start", 1)
	var good []byte
	for _, e := range examples(t, cat) {
		if e.typ == "order.created" {
			good = e.body
		}
	}
	cl := k.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 5 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("k"), Value: good}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		args  []string
		lines int
	}{
		{[]string{"--from", "beginning"}, 5},
		{[]string{"--offset", "3"}, 2},
		{[]string{"--offset", "0:4"}, 1},
		{[]string{"--offset", "1:0"}, 0}, // partition 1 does not exist: nothing to read
		{[]string{"--since", "1h"}, 5},
		{[]string{"--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, 0},
		{[]string{"--from", "beginning", "--max", "2"}, 2},
		{[]string{"--from", "end", "--follow=false"}, 0},
	} {
		out, err := run(t, k, append([]string{"tail", "--topic", topic}, c.args...)...)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if n := len(strings.Fields(strings.ReplaceAll(strings.TrimSpace(out), " ", "_"))); n != c.lines {
			t.Errorf("%v: %d lines, want %d:\n%s", c.args, n, c.lines, out)
		}
	}
}

// produce refuses an event the catalog does not accept, naming what is
// wrong, and produces nothing of the file.
func TestProduceRefusesAnInvalidEventNamingTheField(t *testing.T) {
	k := testkit.NewKafka(t)
	cat := schemas.MustDefault()
	prefix := catalogTopics(t, k, cat)
	var good []byte
	for _, e := range examples(t, cat) {
		if e.typ == "order.created" && e.version == 3 {
			good = e.body
		}
	}
	dir := t.TempDir()
	for _, c := range []struct {
		name, body, want string
	}{
		{"bad-field", string(bytes.Replace(good, []byte(`"currency": "EUR"`), []byte(`"currency": 978`), 1)), "/data/currency"},
		{"unknown-type", strings.Replace(string(good), `"order.created"`, `"order.teleported"`, 1), "order.teleported"},
		{"unknown-version", strings.Replace(string(good), `"event_version": 3`, `"event_version": 99`, 1), "v99"},
		{"not-json", `{"event_type": `, "not JSON"},
	} {
		file := filepath.Join(dir, c.name+".json")
		// The good event first: nothing of the file goes out when any
		// event of it is invalid.
		if err := os.WriteFile(file, append(append([]byte{}, good...), c.body...), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := run(t, k, "produce", file, "--topic-prefix", prefix)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v %q, want an error naming %q", c.name, err, out, c.want)
		}
	}
	out, err := run(t, k, "tail", "--from", "beginning", "--topic-prefix", prefix, "--type", "order.created")
	if err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("after refused files the topic holds: %v %q", err, out)
	}
}

// With --registry, the Avro schema id is the one the registry gave the
// catalog's schema, found by content whatever the subject is called:
// produce frames the value with it and tail reads it back.
func TestRegistryGivesTheAvroSchemaIDs(t *testing.T) {
	k := testkit.NewKafka(t)
	cat := schemas.MustDefault()
	reg := srfake.New()
	defer reg.Close()
	cl, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Another schema first, so the catalog's id is not simply 1.
	if _, err := cl.CreateSchema(ctx, "other-value", sr.Schema{Type: sr.TypeAvro, Schema: `{"type":"record","name":"Other","fields":[{"name":"x","type":"int"}]}`}); err != nil {
		t.Fatal(err)
	}
	var ex example
	for _, e := range examples(t, cat) {
		if entry, _ := cat.Lookup(e.typ); entry.Encoding == schemas.EncodingAvro {
			ex = e
		}
	}
	avsc, err := fs.ReadFile(cat.Files(), fmt.Sprintf("events/%s/v%d.avsc", ex.typ, ex.version))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := cl.CreateSchema(ctx, "any-subject-name", sr.Schema{Type: sr.TypeAvro, Schema: string(avsc)})
	if err != nil {
		t.Fatal(err)
	}
	prefix := catalogTopics(t, k, cat)
	file := filepath.Join(t.TempDir(), "event.json")
	if err := os.WriteFile(file, ex.body, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, k, "produce", file, "--topic-prefix", prefix, "--registry", reg.URL()); err != nil {
		t.Fatalf("produce: %v\n%s", err, out)
	}
	entry, _ := cat.Lookup(ex.typ)
	raw := k.Client(t, kgo.ConsumeTopics(prefix+entry.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fetches := raw.PollRecords(ctx, 1)
	if fetches.NumRecords() != 1 {
		t.Fatalf("no record: %v", fetches.Errors())
	}
	v := fetches.Records()[0].Value
	if got := int(v[1])<<24 | int(v[2])<<16 | int(v[3])<<8 | int(v[4]); v[0] != 0 || got != ss.ID {
		t.Fatalf("framed with id %d (magic %d), the registry's is %d", got, v[0], ss.ID)
	}
	out, err := run(t, k, "tail", "--topic", prefix+entry.Topic, "--from", "beginning", "--registry", reg.URL())
	if err != nil || !strings.Contains(out, fmt.Sprintf(" %s v%d %s ", ex.typ, ex.version, ex.id)) {
		t.Fatalf("tail with --registry: %v\n%s", err, out)
	}
	// Without the registry the same record is an error line naming the id.
	out, err = run(t, k, "tail", "--topic", prefix+entry.Topic, "--from", "beginning")
	if err != nil || !strings.Contains(out, fmt.Sprintf("ERROR decode Avro: unknown schema id %d", ss.ID)) {
		t.Fatalf("tail without ids: %v\n%s", err, out)
	}
}

// A deployment creates only the topics of the flows it runs: a tail over
// the catalog reads the ones that exist instead of failing on the others.
func TestTailOverTheCatalogReadsTheTopicsThatExist(t *testing.T) {
	k := testkit.NewKafka(t)
	cat := schemas.MustDefault()
	prefix := testkit.UniqueName(t, "evctl") + "."
	var ex example
	for _, e := range examples(t, cat) {
		if e.typ == "order.created" {
			ex = e
			break
		}
	}
	entry, _ := cat.Lookup(ex.typ)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := k.Admin(t)
	resp, err := adm.CreateTopic(ctx, 1, 1, nil, prefix+entry.Topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), prefix+entry.Topic) })
	file := filepath.Join(t.TempDir(), "one.json")
	if err := os.WriteFile(file, ex.body, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, k, "produce", file, "--topic-prefix", prefix); err != nil {
		t.Fatalf("produce: %v\n%s", err, out)
	}
	out, err := run(t, k, "tail", "--from", "beginning", "--topic-prefix", prefix, "--format", "json")
	if err != nil {
		t.Fatalf("tail over a catalog whose topics mostly do not exist: %v\n%s", err, out)
	}
	if ls := parseLines(t, out); len(ls) != 1 || ls[0].Error != "" || ls[0].Key != ex.key {
		t.Fatalf("tail printed %+v, want the one order.created keyed %s", ls, ex.key)
	}
	if _, err := run(t, k, "tail", "--from", "beginning", "--topic-prefix", testkit.UniqueName(t, "none")+"."); err == nil {
		t.Fatal("tail where no catalog topic exists succeeded; want an error")
	}
}
