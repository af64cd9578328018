package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/services/orchestrator/orchestratorstore"
)

const reviewsUsage = "orchestrator reviews list [--all] [--json] | resolve ID --by NAME --note TEXT"

// runReviews is `orchestrator reviews list|resolve`: the operator's side
// of a FAILED saga.
func runReviews(ctx context.Context, args []string) error { return reviews(ctx, args, os.Stdout) }

func reviews(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return kit.Usagef("missing command: %s", reviewsUsage)
	}
	cmd, rest := args[0], args[1:]
	fs := kit.NewFlagSet("orchestrator reviews "+cmd, "orchestrator reviews — the review entries of FAILED sagas (a compensation that never succeeded)\n\n  "+reviewsUsage)
	dbURL := fs.String("database-url", "ORCHESTRATOR_DATABASE_URL", "", "PostgreSQL URL of the orchestrator's database (required)")
	all := fs.Bool("all", "", false, "list: resolved entries too")
	asJSON := fs.Bool("json", "", false, "list: one JSON object per line instead of a table")
	by := fs.String("by", "", "", "resolve: who resolved the entry (required)")
	note := fs.String("note", "", "", "resolve: what was done about the saga, e.g. \"refunded by hand, ticket 123\" (required)")
	// kit reads flags before or after the positional arguments, and the
	// environment even when no flag is given.
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) || errors.Is(err, kit.ErrVersion) {
			return err
		}
		return kit.UsageError{Err: err}
	}
	pos := fs.Args()
	if err := kit.Require("database-url", *dbURL); err != nil {
		return kit.UsageError{Err: err}
	}
	var id int64
	switch cmd {
	case "list":
		if len(pos) != 0 {
			return kit.Usagef("list takes no argument")
		}
	case "resolve":
		if len(pos) != 1 {
			return kit.Usagef("resolve needs exactly one review id")
		}
		var err error
		if id, err = strconv.ParseInt(pos[0], 10, 64); err != nil || id < 1 {
			return kit.Usagef("review id %q: want a positive integer", pos[0])
		}
		if strings.TrimSpace(*by) == "" || strings.TrimSpace(*note) == "" {
			return kit.Usagef("resolve needs --by and --note")
		}
	default:
		return kit.Usagef("unknown command %q: %s", cmd, reviewsUsage)
	}
	pool, err := pgxpool.New(ctx, *dbURL)
	if err != nil {
		return kit.Usagef("--database-url: %v", err)
	}
	defer pool.Close()
	if cmd == "resolve" {
		if err := orchestratorstore.Resolve(ctx, pool, id, strings.TrimSpace(*by), strings.TrimSpace(*note)); err != nil {
			return err
		}
		fmt.Fprintf(out, "review %d resolved\n", id)
		return nil
	}
	rs, err := orchestratorstore.Reviews(ctx, pool, !*all)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		for _, r := range rs {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSAGA_ID\tORDER_ID\tFAILED_STEPS\tCREATED_AT\tRESOLVED\tREASON")
	for _, r := range rs {
		resolved := "-"
		if r.ResolvedAt != nil {
			resolved = r.ResolvedAt.UTC().Format(time.RFC3339) + " by " + *r.ResolvedBy
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.SagaID, r.OrderID, strings.Join(r.FailedSteps, ","),
			r.CreatedAt.UTC().Format(time.RFC3339), resolved, r.Reason)
	}
	return tw.Flush()
}
