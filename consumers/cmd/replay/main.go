// Command replay resets a consumer group's offsets so its records are
// delivered again (dry-run by default), optionally clearing the group's
// dedupe rows so handlers run again, and re-publishes dead-lettered records.
//
//	replay (--group G… | --all-groups) (--topic T[:P,…]… | --all-topics) (--to-earliest | --to-latest |
//	       --to-current | --to-offset N | --shift-by N | --to-datetime T | --by-duration D | --from-file CSV)
//	       [--export] [--dry-run | --execute] [--reprocess --database-url URL] [--command-config FILE] [--timeout MS]
//	replay --describe (--group G… | --all-groups) [--members | --state | --offsets]
//	replay --list [--state]
//	replay --delete-offsets --group G --topic T[:P,…]…
//	replay dlq --group G --database-url URL [--id N,…] [--execute]
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/consumers/internal/clientprops"
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

// list is a repeatable flag (--group, --topic).
type list []string

func (l *list) String() string     { return strings.Join(*l, " ") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

// millisOrDuration is --timeout: a Go duration (30s) or, as Apache's
// --timeout takes it, a number of milliseconds.
type millisOrDuration time.Duration

func (d *millisOrDuration) String() string { return time.Duration(*d).String() }
func (d *millisOrDuration) Set(v string) error {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		*d = millisOrDuration(time.Duration(n) * time.Millisecond)
	} else if p, err := time.ParseDuration(v); err == nil {
		*d = millisOrDuration(p)
	} else {
		return fmt.Errorf("want milliseconds (5000) or a duration (5s)")
	}
	if *d <= 0 {
		return fmt.Errorf("must be positive")
	}
	return nil
}

// options are the parsed flags of the reset/describe/list/delete-offsets
// command.
type options struct {
	kf                                                  kit.KafkaFlags
	groups, topics                                      list
	allGroups, allTopics                                bool
	describe, list, deleteOffsets, resetOffsets         bool
	members, state, offsets                             bool
	earliest, latest, current                           bool
	toOffset, shiftBy, toDatetime, byDuration, fromFile string
	export, dryRun, execute, reprocess                  bool
	dbURL, commandConfig                                string
	timeout                                             millisOrDuration
}

func runReset(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := kit.NewFlagSet("replay", "replay resets consumer groups' offsets so their records are delivered again (dry-run unless --execute),\n"+
		"with the options and the choice of offsets of Apache Kafka's kafka-consumer-groups.sh --reset-offsets;\n"+
		"it also describes (--describe) and lists (--list) groups and deletes their offsets (--delete-offsets).\n"+
		"The idempotent consumers skip what they already applied; --reprocess makes their handlers run again.\n"+
		"Sub-command: replay dlq --help")
	fs.SetOutput(stdout)
	fs.AddCommand("dlq", "re-publish a group's dead-lettered records to their original topics")
	var o options
	o.kf = kit.AddKafkaFlags(fs)
	fs.StringVar(&o.commandConfig, "command-config", "", "Kafka client properties file (security.protocol, ssl.*, sasl.mechanism, sasl.jaas.config, sasl.oauthbearer.token.endpoint.url…), as Apache's tools read it; overrides the TLS and SASL flags")
	fs.Var(&o.groups, "group", "consumer group (repeatable); its consumers must be stopped for a reset")
	fs.BoolVar(&o.allGroups, "all-groups", false, "every consumer group of the cluster")
	fs.Var(&o.topics, "topic", "topic T or partitions T:P,P to reset or delete offsets of (repeatable; the union, a partition at most once)")
	fs.BoolVar(&o.allTopics, "all-topics", false, "reset every partition the group has committed offsets for")
	fs.BoolVar(&o.resetOffsets, "reset-offsets", false, "reset offsets (the default action; accepted for Apache compatibility)")
	fs.BoolVar(&o.describe, "describe", false, "describe the groups: offsets and lag (default), --members or --state")
	fs.BoolVar(&o.list, "list", false, "list the cluster's consumer groups (with --state: and their states)")
	fs.BoolVar(&o.deleteOffsets, "delete-offsets", false, "delete the group's committed offsets of the --topic partitions")
	fs.BoolVar(&o.members, "members", false, "with --describe: the live members and how many partitions each holds")
	fs.BoolVar(&o.state, "state", false, "with --describe: coordinator, assignor, state and member count; with --list: each group's state")
	fs.BoolVar(&o.offsets, "offsets", false, "with --describe: offsets and lag per partition (the default)")
	fs.BoolVar(&o.earliest, "to-earliest", false, "reset to the log start offset")
	fs.BoolVar(&o.latest, "to-latest", false, "reset to the log end offset")
	fs.BoolVar(&o.current, "to-current", false, "reset to the committed offset (log end where none)")
	fs.StringVar(&o.toOffset, "to-offset", "", "reset to offset N, clamped to the log")
	fs.StringVar(&o.shiftBy, "shift-by", "", "move the committed offset by N (negative: back), clamped to the log")
	fs.StringVar(&o.toDatetime, "to-datetime", "", "reset to the first record at or after yyyy-MM-ddTHH:mm:ss.SSS[zone], read as Apache reads it (UTC without a zone; see README); RFC 3339 as well")
	fs.StringVar(&o.byDuration, "by-duration", "", "reset to the first record at or after now minus an ISO-8601 duration (PT15M, P1DT2H)")
	fs.StringVar(&o.fromFile, "from-file", "", "reset to the offsets of a CSV plan (Apache's or replay's --export), clamped to the log")
	fs.BoolVar(&o.export, "export", false, "print the plan as CSV (Apache's --export format) instead of a table, for --from-file")
	fs.BoolVar(&o.dryRun, "dry-run", false, "only print the plan (the default)")
	fs.BoolVar(&o.execute, "execute", false, "apply the plan")
	fs.BoolVar(&o.reprocess, "reprocess", false, "also delete the group's processed_events rows for the replayed records, so handlers run again")
	dbURL := fs.String("database-url", "DATABASE_URL", "", "the consumers' database (for --reprocess)")
	o.timeout = millisOrDuration(60 * time.Second)
	fs.Var(&o.timeout, "timeout", "overall deadline: milliseconds (as Apache's --timeout) or a duration")
	fs.LegacyEnv("timeout", "REPLAY_TIMEOUT")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.dbURL = *dbURL
	if fs.NArg() > 0 {
		return kit.Usagef("unexpected argument %q", fs.Arg(0))
	}
	actions := 0
	for _, a := range []bool{o.describe, o.list, o.deleteOffsets, o.resetOffsets} {
		if a {
			actions++
		}
	}
	if actions > 1 {
		return kit.Usagef("give at most one of --reset-offsets, --describe, --list and --delete-offsets")
	}
	if !o.list && len(o.groups) > 0 == o.allGroups {
		return kit.Usagef("give --group (repeatable) or --all-groups")
	}

	ctx, cancel := context.WithTimeout(ctx, time.Duration(o.timeout))
	defer cancel()
	switch {
	case o.list:
		return withAdmin(o, stderr, func(adm *kadm.Client) error { return runList(ctx, adm, o, stdout) })
	case o.describe:
		return withAdmin(o, stderr, func(adm *kadm.Client) error { return runDescribe(ctx, adm, o, stdout) })
	case o.deleteOffsets:
		if len(o.groups) != 1 || len(o.topics) == 0 {
			return kit.Usagef("--delete-offsets takes one --group and --topic")
		}
		return withAdmin(o, stderr, func(adm *kadm.Client) error { return runDeleteOffsets(ctx, adm, o, stdout) })
	}

	if o.fromFile == "" && o.allTopics == (len(o.topics) > 0) {
		return kit.Usagef("give exactly one of --topic or --all-topics")
	}
	if o.dryRun && o.execute {
		return kit.Usagef("--dry-run and --execute are exclusive")
	}
	if o.reprocess && o.dbURL == "" {
		return kit.Usagef("--reprocess needs --database-url")
	}
	if o.reprocess && len(o.groups) != 1 {
		return kit.Usagef("--reprocess takes a single --group")
	}
	if o.reprocess && o.export {
		return kit.Usagef("--reprocess and --export are exclusive")
	}
	spec, err := specFromFlags(o.earliest, o.latest, o.current, o.toOffset, o.shiftBy, o.toDatetime, o.byDuration, o.fromFile, time.Now())
	if err != nil {
		return err
	}
	if spec.Note != "" {
		fmt.Fprintf(stderr, "note: --to-datetime %s is %s, %s\n", o.toDatetime, spec.Time.Format("2006-01-02T15:04:05.000Z07:00"), spec.Note)
	}
	target := replay.Target{All: o.allTopics, Topics: o.topics}
	if spec.Strategy == replay.FromFile {
		f, err := os.Open(o.fromFile)
		if err != nil {
			return kit.Usagef("--from-file: %v", err)
		}
		target.File, err = replay.ReadCSV(f, o.groups)
		f.Close()
		if err != nil {
			return kit.Usagef("--from-file %s: %v", o.fromFile, err)
		}
	}

	conn, err := clientOpts(o, stderr)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(conn...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	groups := []string(o.groups)
	if o.allGroups {
		listed, err := replay.ListGroups(ctx, adm)
		if err != nil {
			return err
		}
		groups = groups[:0]
		for _, g := range listed {
			groups = append(groups, g.Group)
		}
	}
	// As Apache's tool, a live group is refused and the others planned; any
	// other failure stops everything before anything is changed.
	var plans replay.Plans
	var refused []string
	var refusedErr error
	for _, g := range groups {
		plan, err := replay.Prepare(ctx, adm, g, target, spec)
		if errors.Is(err, replay.ErrGroupActive) {
			fmt.Fprintf(stderr, "Error: %s\n", strings.TrimPrefix(err.Error(), replay.ErrGroupActive.Error()+": "))
			refused, refusedErr = append(refused, g), err
			continue
		}
		if err != nil {
			return err
		}
		for _, w := range plan.Warnings {
			fmt.Fprintln(stderr, w)
		}
		plans = append(plans, plan)
	}
	refusal := func() error {
		if len(refused) == 0 {
			return nil
		}
		if len(refused) == 1 {
			return fmt.Errorf("%w Stop its consumers first", refusedErr)
		}
		return fmt.Errorf("%w: groups %s were not reset; stop their consumers first", replay.ErrGroupActive, strings.Join(refused, ", "))
	}
	info := stdout
	if o.export {
		if err := plans.WriteCSV(stdout, len(o.groups) == 1); err != nil {
			return err
		}
		info = stderr // stdout holds only the CSV
	} else {
		for _, plan := range plans {
			printPlan(stdout, plan)
		}
	}

	if !o.reprocess || len(plans) == 0 {
		if !o.execute {
			fmt.Fprintln(info, "\nDry run: nothing changed. Add --execute to apply.")
			return refusal()
		}
		for _, plan := range plans {
			if err := replay.Execute(ctx, adm, plan); err != nil {
				return err
			}
			fmt.Fprintf(info, "\nOffsets of group %s reset. Its consumers skip the events they already applied (dedupe); add --reprocess to run handlers again.\n", plan.Group)
		}
		return refusal()
	}
	plan := plans[0]

	pool, err := kit.NewPool(ctx, o.dbURL)
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
	if !o.execute {
		n, err := replay.CountProcessed(ctx, pool, plan.Group, ids)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nDry run: nothing changed. --execute would delete %d processed_events rows of group %s (%d events in the replayed range).\n", n, plan.Group, len(ids))
		return nil
	}
	n, err := replay.Reprocess(ctx, pool, plan.Group, ids, func() error { return replay.Execute(ctx, adm, plan) })
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nOffsets of group %s reset. Deleted %d processed_events rows (%d events in the replayed range): their handlers run again.\n", plan.Group, n, len(ids))
	return nil
}

// clientOpts are the connection options: the Kafka flags, with
// --command-config's security settings over them when it sets
// security.protocol.
func clientOpts(o options, stderr io.Writer) ([]kgo.Opt, error) {
	kc := o.kf.Config()
	if o.commandConfig == "" {
		conn, err := kc.Opts()
		if err != nil {
			return nil, kit.UsageError{Err: err}
		}
		return conn, nil
	}
	props, err := clientprops.Load(o.commandConfig)
	if err != nil {
		return nil, kit.Usagef("--command-config %v", err)
	}
	for _, w := range props.Warnings {
		fmt.Fprintf(stderr, "warning: --command-config: %s\n", w)
	}
	if props.Protocol != "" {
		kc.TLS, kc.TLSCAFile, kc.SASLMechanism = false, "", ""
	}
	conn, err := kc.Opts()
	if err != nil {
		return nil, kit.UsageError{Err: err}
	}
	return append(conn, props.Opts()...), nil
}

func withAdmin(o options, stderr io.Writer, fn func(*kadm.Client) error) error {
	conn, err := clientOpts(o, stderr)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(conn...)
	if err != nil {
		return err
	}
	defer cl.Close()
	return fn(kadm.NewClient(cl))
}

// specFromFlags turns the mutually exclusive reset options into a Spec.
func specFromFlags(earliest, latest, current bool, toOffset, shiftBy, toDatetime, byDuration, fromFile string, now time.Time) (replay.Spec, error) {
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
	if fromFile != "" {
		add("--from-file", replay.Spec{Strategy: replay.FromFile})
	}
	switch len(specs) {
	case 0:
		return replay.Spec{}, kit.Usagef("give one reset option: --to-earliest, --to-latest, --to-current, --to-offset, --shift-by, --to-datetime, --by-duration or --from-file")
	case 1:
		return specs[0], nil
	default:
		return replay.Spec{}, kit.Usagef("reset options %s are exclusive", strings.Join(names, ", "))
	}
}

func runList(ctx context.Context, adm *kadm.Client, o options, stdout io.Writer) error {
	groups, err := replay.ListGroups(ctx, adm)
	if err != nil {
		return err
	}
	if !o.state {
		for _, g := range groups {
			fmt.Fprintln(stdout, g.Group)
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "GROUP\tSTATE\n")
	for _, g := range groups {
		fmt.Fprintf(tw, "%s\t%s\n", g.Group, g.State)
	}
	return tw.Flush()
}

// runDescribe prints what Apache's --describe prints, in its columns.
func runDescribe(ctx context.Context, adm *kadm.Client, o options, stdout io.Writer) error {
	if n := btoi(o.members) + btoi(o.state) + btoi(o.offsets); n > 1 {
		return kit.Usagef("--describe takes at most one of --members, --state and --offsets")
	}
	groups := []string(o.groups)
	if o.allGroups {
		listed, err := replay.ListGroups(ctx, adm)
		if err != nil {
			return err
		}
		groups = nil
		for _, g := range listed {
			groups = append(groups, g.Group)
		}
	}
	ds, err := replay.Describe(ctx, adm, groups...)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	for _, d := range ds {
		fmt.Fprintln(tw)
		switch {
		case o.state:
			coord := "-"
			if d.Type != "" {
				coord = fmt.Sprintf("%s:%d (%d)", d.Coordinator.Host, d.Coordinator.Port, d.Coordinator.NodeID)
			}
			fmt.Fprintf(tw, "GROUP\tCOORDINATOR (ID)\tASSIGNMENT-STRATEGY\tSTATE\t#MEMBERS\n")
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", d.Name, coord, dash(d.Assignor), d.State, len(d.Members))
			continue
		case d.State == "Dead":
			fmt.Fprintf(tw, "Consumer group '%s' does not exist.\n", d.Name)
			continue
		case len(d.Members) == 0:
			fmt.Fprintf(tw, "Consumer group '%s' has no active members.\n", d.Name)
			if o.members {
				continue
			}
		}
		if o.members {
			fmt.Fprintf(tw, "GROUP\tCONSUMER-ID\tHOST\tCLIENT-ID\t#PARTITIONS\n")
			for _, m := range d.Members {
				n := 0
				m.Assignment.Each(func(string, int32) { n++ })
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", d.Name, m.ID, m.Host, m.ClientID, n)
			}
			continue
		}
		fmt.Fprintf(tw, "GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID\n")
		for _, r := range d.Offsets {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Name, r.Topic, r.Partition, offset(r.Current), offset(r.End), offset(r.Lag),
				dash(r.MemberID), dash(r.Host), dash(r.ClientID))
		}
	}
	return nil
}

func runDeleteOffsets(ctx context.Context, adm *kadm.Client, o options, stdout io.Writer) error {
	res, err := replay.DeleteOffsets(ctx, adm, o.groups[0], o.topics)
	if err != nil {
		return err
	}
	tps := make([]replay.TopicPartition, 0, len(res))
	failed := 0
	for tp, e := range res {
		tps = append(tps, tp)
		if e != nil {
			failed++
		}
	}
	sort.Slice(tps, func(i, j int) bool {
		return tps[i].Topic < tps[j].Topic || tps[i].Topic == tps[j].Topic && tps[i].Partition < tps[j].Partition
	})
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "TOPIC\tPARTITION\tSTATUS\n")
	for _, tp := range tps {
		status := "Successful"
		if e := res[tp]; e != nil {
			status = "Error: " + e.Error()
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", tp.Topic, tp.Partition, status)
	}
	tw.Flush()
	if failed > 0 {
		return fmt.Errorf("deleting the offsets of %d partitions of group %s failed (a live member subscribes to their topic?)", failed, o.groups[0])
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func offset(n int64) string {
	if n < 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
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
	fs.SetOutput(stdout)
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
