package reconcilercli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/services/reconciler"
	"github.com/concordhq/concord/services/reconciler/reconcilerstore"
)

// findings is `reconciler findings list|show ID|resolve ID --note …`: the
// review workflow over recorded drift.
func findings(ctx context.Context, args []string, out io.Writer) error {
	fs := kit.NewFlagSet("reconciler findings", "reconciler findings: review the recorded drift between the payments database and the provider.")
	fs.SetOutput(out)
	sub := func(name string) func(context.Context, []string) error {
		return func(ctx context.Context, args []string) error { return finding(ctx, name, args, out) }
	}
	return fs.Dispatch(ctx, args, []kit.Command{
		{Name: "list", Summary: "open findings, newest first (--all includes resolved ones)", Run: sub("list")},
		{Name: "show", Summary: "show ID: one finding with its evidence", Run: sub("show")},
		{Name: "resolve", Summary: `resolve ID --note "what was done": close a finding`, Run: sub("resolve")},
	})
}

// finding runs one findings subcommand; the id may come before or after
// the flags.
func finding(ctx context.Context, sub string, args []string, out io.Writer) error {
	c := flags("findings "+sub, out)
	var all *bool
	var kind, note, by *string
	var limit *int
	switch sub {
	case "list":
		all = c.fs.Bool("all", "", false, "include resolved findings")
		kind = c.fs.String("kind", "", "", "only this kind")
		limit = c.fs.Int("limit", "", 100, "at most this many, newest first")
	case "show":
		c.fs.SetUsage("reconciler findings show ID [flags]")
	case "resolve":
		c.fs.SetUsage("reconciler findings resolve ID --note NOTE [flags]")
		note = c.fs.String("note", "", "", "what was done about it (required)")
		by = c.fs.String("by", "", cmp.Or(os.Getenv("USER"), "operator"), "who resolves it (default: $USER, else operator)")
	}
	if err := c.fs.Parse(args); err != nil {
		return err
	}
	rest := c.fs.Args()
	var id int64
	if sub == "list" {
		if len(rest) > 0 {
			return kit.Usagef("findings list: unexpected argument %q", rest[0])
		}
	} else {
		if len(rest) != 1 {
			return kit.Usagef("findings %s: exactly one finding id is required", sub)
		}
		n, err := strconv.ParseInt(rest[0], 10, 64)
		if err != nil || n <= 0 {
			return kit.Usagef("findings %s: %q is not a finding id", sub, rest[0])
		}
		id = n
	}
	if sub == "resolve" && strings.TrimSpace(*note) == "" {
		return kit.Usagef("findings resolve %d: --note saying what was done is required", id)
	}
	d, err := c.open(ctx, "findings")
	if err != nil {
		return err
	}
	defer d.close()
	switch sub {
	case "list":
		fs, err := d.store.Findings(ctx, reconcilerstore.FindingFilter{All: *all, Kind: reconciler.Kind(*kind), Limit: *limit})
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tPAYMENT\tKIND\tVERDICT\tLOCAL\tPROVIDER\tDETECTED\tRESOLUTION")
		for _, f := range fs {
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", f.ID, f.PaymentID, f.Kind, f.Verdict, f.LocalStatus,
				dash(f.ExternalStatus), f.DetectedAt.UTC().Format(time.RFC3339), dash(string(f.Resolution)))
		}
		return tw.Flush()
	case "show":
		f, err := d.store.Finding(ctx, id)
		if err != nil {
			return err
		}
		printFinding(out, f)
		return nil
	default:
		if err := d.store.Resolve(ctx, id, *by, *note); err != nil {
			if errors.Is(err, reconciler.ErrFindingNotFound) || errors.Is(err, reconciler.ErrFindingResolved) {
				return kit.UsageError{Err: err}
			}
			return err
		}
		fmt.Fprintf(out, "finding %d resolved\n", id)
		return nil
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printFinding(w io.Writer, f reconciler.Finding) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, dash(v)) }
	row("id", strconv.FormatInt(f.ID, 10))
	row("payment", strconv.FormatInt(f.PaymentID, 10))
	row("order", f.OrderID)
	row("provider payment", f.ProviderID)
	row("kind", string(f.Kind))
	row("verdict", string(f.Verdict))
	row("local status", f.LocalStatus)
	row("provider status", f.ExternalStatus)
	row("repair command", string(f.RepairCommand))
	row("command event", f.CommandEventID)
	row("source", string(f.Source))
	row("detected", f.DetectedAt.UTC().Format(time.RFC3339))
	if f.ResolvedAt != nil {
		row("resolved", f.ResolvedAt.UTC().Format(time.RFC3339))
	}
	row("resolution", string(f.Resolution))
	row("resolved by", f.ResolvedBy)
	row("note", f.Note)
	_ = tw.Flush()
}
