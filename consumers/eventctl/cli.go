package eventctl

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/schemas"
)

const summary = `eventctl reads and writes Concord's events on Kafka with the schema catalog:
tail decodes JSON and Confluent-framed Avro envelopes and prints them one per
line (or as JSON lines); produce validates events against the catalog and
appends them keyed by their type's partition key.`

// Run runs the command line args (without the program name).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := kit.NewFlagSet("eventctl", summary)
	fs.SetOutput(stdout)
	return fs.Dispatch(ctx, args, []kit.Command{
		{Name: "tail", Summary: "print the events of topics from the beginning, the end, an offset or a time",
			Run: func(ctx context.Context, args []string) error { return runTail(ctx, args, stdout, stderr) }},
		{Name: "produce", Summary: "validate events from FILE (or stdin) against the catalog and append them",
			Run: func(ctx context.Context, args []string) error { return runProduce(ctx, args, stdout) }},
	})
}

// common are the flags both commands take.
type common struct {
	fs      *kit.FlagSet
	kafka   kit.KafkaFlags
	prefix  *string
	reg     *string
	avroIDs *string
}

func newCommon(name, summary string, out io.Writer) *common {
	c := &common{fs: kit.NewFlagSet("eventctl "+name, summary)}
	c.fs.SetOutput(out)
	c.kafka = kit.AddKafkaFlags(c.fs)
	c.prefix = c.fs.String("topic-prefix", "", "", "prefix of the catalog's topic names (as the services' --topic-prefix)")
	c.reg = c.fs.String("registry", "SCHEMA_REGISTRY_URL", "", "schema registry URL: the ids of the catalog's Avro schemas are looked up there by content")
	c.avroIDs = c.fs.String("avro-ids", "", "", "schema ids of Avro schemas, TYPE/vN=ID comma-separated (e.g. account.debited/v1=7); they win over --registry")
	return c
}

// codec builds the catalog's codec with the Avro schema ids the flags give.
func (c *common) codec(ctx context.Context) (Codec, error) {
	cat, err := schemas.Default()
	if err != nil {
		return Codec{}, err
	}
	given, err := ParseAvroIDs(cat, *c.avroIDs)
	if err != nil {
		return Codec{}, kit.UsageError{Err: err}
	}
	ids := map[string]int{}
	if *c.reg != "" {
		cl, err := sr.NewClient(sr.URLs(*c.reg))
		if err != nil {
			return Codec{}, kit.UsageError{Err: fmt.Errorf("--registry: %w", err)}
		}
		if ids, err = RegistryIDs(ctx, cl, cat); err != nil {
			return Codec{}, err
		}
	}
	for k, v := range given {
		ids[k] = v
	}
	serde, err := NewSerde(cat, ids)
	if err != nil {
		return Codec{}, err
	}
	return Codec{Catalog: cat, Avro: serde, AvroIDs: ids}, nil
}

func runTail(ctx context.Context, args []string, out, errOut io.Writer) error {
	c := newCommon("tail", "eventctl tail prints the events of topics, decoded and checked with the schema catalog.", out)
	fs := c.fs
	fs.SetUsage("eventctl tail [flags]")
	topicsFlag := fs.String("topic", "", "", "comma-separated topics (default: the topics of --type, else every topic of the catalog; --topic-prefix applies)")
	from := fs.String("from", "", "end", "where to start without --offset or --since: beginning or end")
	offset := fs.String("offset", "", "", "start at this offset of every partition, or at P:N,P:N (only the partitions listed)")
	since := fs.String("since", "", "", "start at the first record at or after an RFC 3339 time or a duration back from now (15m)")
	types := fs.String("type", "", "", "only events of these comma-separated types")
	key := fs.String("key", "", "", "only records with this key (the partition key: order id, account id…)")
	maxEvents := fs.Int("max", "", 0, "stop after printing this many events (0: no limit)")
	follow := fs.Bool("follow", "", false, "keep waiting for new events (the default with --from end and no --offset/--since); without it tail stops at the end offsets it found on start")
	format := fs.String("format", "", "text", "output: text (one readable line per event) or json (one JSON object per line)")
	idleEnd := fs.Duration("idle-end", "", DefaultIdleEnd, "without --follow: stop when no record came for this long (offsets that hold no record: transaction markers, compaction); the partitions not read to their end are named on stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return kit.Usagef("unexpected argument %q (topics go in --topic)", fs.Arg(0))
	}
	st, err := ParseStart(*from, *offset, *since, time.Now())
	if err != nil {
		return kit.UsageError{Err: err}
	}
	followSet := false
	fs.Visit(func(f *flag.Flag) { followSet = followSet || f.Name == "follow" })
	if !followSet && os.Getenv(kit.EnvName("follow")) == "" {
		*follow = st.Kind == "end"
	}
	var print func(Event) string
	switch *format {
	case "text":
		print = Text
	case "json":
		print = JSON
	default:
		return kit.Usagef("--format %q: want text or json", *format)
	}
	if *maxEvents < 0 {
		return kit.Usagef("--max %d: must not be negative", *maxEvents)
	}
	codec, err := c.codec(ctx)
	if err != nil {
		return err
	}
	filter := Filter{Key: *key}
	if filter.Types, err = ParseTypes(codec.Catalog, *types); err != nil {
		return kit.UsageError{Err: err}
	}
	topics := topicsOf(codec.Catalog, *topicsFlag, filter.Types, *c.prefix)

	cl, err := kit.NewKafkaClient(ctx, c.kafka.Config(), nil)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if *topicsFlag == "" {
		// The catalog names topics a deployment may never have created
		// (a flow it does not run): tail the ones that exist.
		if topics, err = existing(ctx, adm, topics); err != nil {
			return err
		}
	}
	b, err := bounds(ctx, adm, topics, st)
	if err != nil {
		return err
	}
	ranges := map[string]map[int32]Range{}
	for t, pb := range b {
		ranges[t] = st.Plan(pb)
	}
	w := bufio.NewWriter(out)
	defer w.Flush()
	_, short, err := tail(ctx, cl, ranges, *follow, *maxEvents, *idleEnd, codec, filter, func(ev Event) error {
		if _, err := fmt.Fprintln(w, print(ev)); err != nil {
			return err
		}
		// A followed tail shows each event as it comes.
		if *follow {
			return w.Flush()
		}
		return nil
	})
	if len(short) > 0 {
		fmt.Fprintf(errOut, "eventctl: no record for %v, stopped before the end offsets of %s (offsets without records, or a slow broker: a longer --idle-end waits more)\n",
			*idleEnd, strings.Join(short, ", "))
	}
	return err
}

// existing keeps the topics the cluster has, in their order; none is an
// error naming them.
func existing(ctx context.Context, adm *kadm.Client, topics []string) ([]string, error) {
	details, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	var out []string
	for _, t := range topics {
		if d, ok := details[t]; ok && d.Err == nil {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("none of the topics %v exists", topics)
	}
	return out, nil
}

// topicsOf lists the topics tail reads: --topic, else those of the types
// asked for, else every topic of the catalog.
func topicsOf(cat *schemas.Catalog, flag string, types map[string]bool, prefix string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(t string) {
		if t != "" && !seen[t] {
			seen[t] = true
			out = append(out, prefix+t)
		}
	}
	for _, t := range strings.Split(flag, ",") {
		add(strings.TrimSpace(t))
	}
	if len(out) > 0 {
		return out
	}
	for _, typ := range cat.Types() {
		if len(types) == 0 || types[typ] {
			e, _ := cat.Lookup(typ)
			add(e.Topic)
		}
	}
	return out
}

func runProduce(ctx context.Context, args []string, out io.Writer) error {
	c := newCommon("produce", "eventctl produce validates events against the schema catalog (type, version, payload) and appends them to their type's topic, keyed by its partition key.\n"+
		"FILE holds one JSON envelope or several (one per line or concatenated); - or no FILE reads stdin. Nothing is produced unless every event is valid.", out)
	fs := c.fs
	fs.SetUsage("eventctl produce [FILE|-] [flags]")
	fresh := fs.Bool("fresh", "", false, "give each event a new event_id and the current timestamp (consumers deduplicate on event_id)")
	dryRun := fs.Bool("dry-run", "", false, "validate and print where each event would go; produce nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return kit.Usagef("produce takes one FILE, got %d arguments", fs.NArg())
	}
	var in io.Reader = os.Stdin
	name := "stdin"
	if fs.NArg() == 1 && fs.Arg(0) != "-" {
		f, err := os.Open(fs.Arg(0))
		if err != nil {
			return kit.UsageError{Err: err}
		}
		defer f.Close()
		in, name = f, fs.Arg(0)
	}
	codec, err := c.codec(ctx)
	if err != nil {
		return err
	}
	events, err := ReadEvents(in)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	now := time.Now()
	msgs := make([]Message, len(events))
	for i, e := range events {
		if msgs[i], err = codec.Prepare(e, *c.prefix, *fresh, now); err != nil {
			if len(events) > 1 {
				return fmt.Errorf("%s: event %d: %w", name, i+1, err)
			}
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if *dryRun {
		for _, m := range msgs {
			fmt.Fprintf(out, "valid %s v%d %s → %s key %s\n", m.Type, m.Version, m.EventID, m.Topic, m.Key)
		}
		return nil
	}
	cl, err := kit.NewKafkaClient(ctx, c.kafka.Config(), nil, kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil))) // as the relay: a key lands where its other events do
	if err != nil {
		return err
	}
	defer cl.Close()
	recs := make([]*kgo.Record, len(msgs))
	for i, m := range msgs {
		r := &kgo.Record{Topic: m.Topic, Key: []byte(m.Key), Value: m.Value}
		for _, h := range []string{schemas.HeaderEventID, schemas.HeaderEventType, schemas.HeaderEventVersion, schemas.HeaderContentType} {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: h, Value: []byte(m.Headers[h])})
		}
		recs[i] = r
	}
	res := cl.ProduceSync(ctx, recs...)
	for i, r := range res {
		if r.Err != nil {
			return fmt.Errorf("produce %s %s to %s: %w", msgs[i].Type, msgs[i].EventID, msgs[i].Topic, r.Err)
		}
		fmt.Fprintf(out, "produced %s v%d %s → %s/%d@%s key %s\n", msgs[i].Type, msgs[i].Version, msgs[i].EventID,
			r.Record.Topic, r.Record.Partition, strconv.FormatInt(r.Record.Offset, 10), msgs[i].Key)
	}
	return nil
}
