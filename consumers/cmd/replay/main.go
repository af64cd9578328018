// Command replay resets a consumer group's offsets so its records are
// delivered again (dry-run by default), optionally clearing the group's
// dedupe rows so handlers run again, and re-publishes dead-lettered records.
//
//	replay --group G (--topic T[:P,…] | --all-topics) (--to-earliest | --to-latest | --to-current |
//	       --to-offset N | --shift-by N | --to-datetime T | --by-duration D) [--dry-run | --execute]
//	       [--reprocess --database-url URL]
//	replay dlq --group G --database-url URL [--id N,…] [--execute]
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/consumers/replay"
	"github.com/concordhq/concord/infra/kit"
)

func main() {
	kit.Main("replay", func(ctx context.Context, args []string) error { return run(ctx, args, os.Stdout, os.Stderr) })
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "dlq" {
		return runDLQ(ctx, args[1:], stdout, stderr)
	}
	return runReset(ctx, args, stdout, stderr)
}

// topicList is a repeatable --topic flag.
type topicList []string

func (l *topicList) String() string     { return strings.Join(*l, " ") }
func (l *topicList) Set(v string) error { *l = append(*l, v); return nil }

func runReset(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := kit.NewFlagSet("replay", "replay resets a consumer group's offsets so its records are delivered again; dry-run unless --execute.\n"+
		"The idempotent consumers skip what they already applied; --reprocess makes their handlers run again.\n"+
		"Sub-command: replay dlq --help")
	fs.SetOutput(stderr)
	kf := kit.AddKafkaFlags(fs)
	group := fs.String("group", "", "", "consumer group to reset (its consumers must be stopped)")
	var topics topicList
	fs.Var(&topics, "topic", "topic to reset, T or T:P,P (repeatable)")
	all := fs.Bool("all-topics", "", false, "reset every partition the group has committed offsets for")
	earliest := fs.Bool("to-earliest", "", false, "reset to the log start offset")
	latest := fs.Bool("to-latest", "", false, "reset to the log end offset")
	current := fs.Bool("to-current", "", false, "reset to the committed offset (log end where none)")
	toOffset := fs.String("to-offset", "", "", "reset to offset N, clamped to the log")
	shiftBy := fs.String("shift-by", "", "", "move the committed offset by N (negative: back), clamped to the log")
	toDatetime := fs.String("to-datetime", "", "", "reset to the first record at or after yyyy-MM-ddTHH:mm:ss.SSS[zone] (UTC without zone)")
	byDuration := fs.String("by-duration", "", "", "reset to the first record at or after now minus an ISO-8601 duration (PT15M, P1DT2H)")
	dryRun := fs.Bool("dry-run", "", false, "only print the plan (the default)")
	execute := fs.Bool("execute", "", false, "apply the plan")
	reprocess := fs.Bool("reprocess", "", false, "also delete the group's processed_events rows for the replayed records, so handlers run again")
	dbURL := fs.String("database-url", "DATABASE_URL", "", "the consumers' database (for --reprocess)")
	timeout := fs.Duration("timeout", "REPLAY_TIMEOUT", 60*time.Second, "overall deadline")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return kit.Usagef("unexpected argument %q", fs.Arg(0))
	}
	if *group == "" {
		return kit.Usagef("--group is required")
	}
	if *all == (len(topics) > 0) {
		return kit.Usagef("give exactly one of --topic or --all-topics")
	}
	if *dryRun && *execute {
		return kit.Usagef("--dry-run and --execute are exclusive")
	}
	if *reprocess && *dbURL == "" {
		return kit.Usagef("--reprocess needs --database-url")
	}
	spec, err := specFromFlags(*earliest, *latest, *current, *toOffset, *shiftBy, *toDatetime, *byDuration, time.Now())
	if err != nil {
		return err
	}

	if spec.Note != "" {
		fmt.Fprintf(stderr, "note: --to-datetime %s is %s, %s\n", *toDatetime, spec.Time.Format("2006-01-02T15:04:05.000Z07:00"), spec.Note)
	}

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	conn, err := kf.Config().Opts()
	if err != nil {
		return kit.UsageError{Err: err}
	}
	cl, err := kgo.NewClient(conn...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	plan, err := replay.Prepare(ctx, adm, *group, replay.Target{All: *all, Topics: topics}, spec)
	if err != nil {
		return err
	}
	printPlan(stdout, plan)

	if !*reprocess {
		if !*execute {
			fmt.Fprintln(stdout, "\nDry run: nothing changed. Add --execute to apply.")
			return nil
		}
		if err := replay.Execute(ctx, adm, plan); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nOffsets of group %s reset. Its consumers skip the events they already applied (dedupe); add --reprocess to run handlers again.\n", *group)
		return nil
	}

	pool, err := kit.NewPool(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	ids, short, err := replay.ReadEventIDs(ctx, conn, plan.Rows, 5*time.Second)
	if err != nil {
		return fmt.Errorf("read the replayed range: %w", err)
	}
	if len(short) > 0 {
		fmt.Fprintf(stderr, "warning: partitions %s yielded no records up to their end offset; their trailing offsets hold no data (transaction markers or compaction)\n", strings.Join(short, ","))
	}
	if !*execute {
		n, err := replay.CountProcessed(ctx, pool, *group, ids)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nDry run: nothing changed. --execute would delete %d processed_events rows of group %s (%d events in the replayed range).\n", n, *group, len(ids))
		return nil
	}
	n, err := replay.Reprocess(ctx, pool, *group, ids, func() error { return replay.Execute(ctx, adm, plan) })
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nOffsets of group %s reset. Deleted %d processed_events rows (%d events in the replayed range): their handlers run again.\n", *group, n, len(ids))
	return nil
}

// specFromFlags turns the mutually exclusive reset options into a Spec.
func specFromFlags(earliest, latest, current bool, toOffset, shiftBy, toDatetime, byDuration string, now time.Time) (replay.Spec, error) {
	var specs []replay.Spec
	var names []string
	add := func(name string, s replay.Spec) { specs = append(specs, s); names = append(names, name) }
	if earliest {
		add("--to-earliest", replay.Spec{Strategy: replay.ToEarliest})
	}
	if latest {
		add("--to-latest", replay.Spec{Strategy: replay.ToLatest})
	}
	if current {
		add("--to-current", replay.Spec{Strategy: replay.ToCurrent})
	}
	if toOffset != "" {
		n, err := strconv.ParseInt(toOffset, 10, 64)
		if err != nil {
			return replay.Spec{}, kit.Usagef("--to-offset %q: not an integer", toOffset)
		}
		add("--to-offset", replay.Spec{Strategy: replay.ToOffset, Offset: n})
	}
	if shiftBy != "" {
		n, err := strconv.ParseInt(shiftBy, 10, 64)
		if err != nil {
			return replay.Spec{}, kit.Usagef("--shift-by %q: not an integer", shiftBy)
		}
		add("--shift-by", replay.Spec{Strategy: replay.ShiftBy, Offset: n})
	}
	if toDatetime != "" {
		t, note, err := replay.ParseDateTime(toDatetime)
		if err != nil {
			return replay.Spec{}, kit.UsageError{Err: err}
		}
		add("--to-datetime", replay.Spec{Strategy: replay.ToDatetime, Time: t, Note: note})
	}
	if byDuration != "" {
		d, err := replay.ParseDuration(byDuration)
		if err != nil {
			return replay.Spec{}, kit.UsageError{Err: err}
		}
		add("--by-duration", replay.Spec{Strategy: replay.ByDuration, Time: now.Add(-d)})
	}
	switch len(specs) {
	case 0:
		return replay.Spec{}, kit.Usagef("give one reset option: --to-earliest, --to-latest, --to-current, --to-offset, --shift-by, --to-datetime or --by-duration")
	case 1:
		return specs[0], nil
	default:
		return replay.Spec{}, kit.Usagef("reset options %s are exclusive", strings.Join(names, ", "))
	}
}

func printPlan(w io.Writer, plan replay.Plan) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tNEW-OFFSET\n")
	for _, r := range plan.Rows {
		cur := "-"
		if r.Current >= 0 {
			cur = strconv.FormatInt(r.Current, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\n", plan.Group, r.Topic, r.Partition, cur, r.New)
	}
	tw.Flush()
}

func runDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := kit.NewFlagSet("replay dlq", "replay dlq re-publishes a group's dead-lettered records to their original topics (after a fix); dry-run unless --execute.")
	fs.SetOutput(stderr)
	kf := kit.AddKafkaFlags(fs)
	group := fs.String("group", "", "", "consumer group whose dead letters to replay")
	dbURL := fs.String("database-url", "DATABASE_URL", "", "the consumers' database (dead_letters)")
	idList := fs.String("id", "", "", "only these dead_letters ids, comma-separated (default: every pending one)")
	execute := fs.Bool("execute", "", false, "re-publish (default: list only)")
	timeout := fs.Duration("timeout", "REPLAY_TIMEOUT", 60*time.Second, "overall deadline")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := kit.Require("group", *group, "database-url", *dbURL); err != nil {
		return kit.UsageError{Err: err}
	}
	var ids []int64
	for _, s := range strings.Split(*idList, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return kit.Usagef("--id %q: not an integer", s)
		}
		ids = append(ids, n)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	pool, err := kit.NewPool(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	dls, err := replay.PendingDeadLetters(ctx, pool, *group, ids)
	if err != nil {
		return err
	}
	printDeadLetters(stdout, dls)
	if len(dls) == 0 {
		fmt.Fprintf(stdout, "No pending dead letters for group %s.\n", *group)
		return nil
	}
	if !*execute {
		fmt.Fprintln(stdout, "\nDry run: nothing re-published. Add --execute to re-publish these to their original topics.")
		return nil
	}
	conn, err := kf.Config().Opts()
	if err != nil {
		return kit.UsageError{Err: err}
	}
	cl, err := kgo.NewClient(append(conn, kgo.ProducerLinger(0))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := replay.Republish(ctx, cl, pool, dls); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nRe-published %d dead letters of group %s to their original topics.\n", len(dls), *group)
	return nil
}

func printDeadLetters(w io.Writer, dls []replay.DeadLetter) {
	if len(dls) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "ID\tTOPIC\tPARTITION\tOFFSET\tEVENT-ID\tEVENT-TYPE\tREASON\tFAILED-AT\tERROR\n")
	for _, d := range dls {
		msg := d.Error
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		if len(msg) > 120 {
			msg = msg[:117] + "..."
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", d.ID, d.Topic, d.Partition, d.Offset, dash(d.EventID), dash(d.EventType),
			d.Reason, d.FailedAt.UTC().Format(time.RFC3339), msg)
	}
	tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
