package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/services/order/apikey"
	"github.com/concordhq/concord/services/order/orderstore"
)

const keysSummary = `order-svc keys — the order API's keys. A request presents one as
"Authorization: Bearer KEY"; a key has scopes (orders:write to create
orders, orders:read to read them) and may be restricted to one customer.
Only a key's SHA-256 is stored: create prints the key once.`

// keysCommand is `order-svc keys create|list|revoke`.
func keysCommand(out io.Writer) kit.Command {
	return kit.Command{Name: "keys", Summary: "create, list and revoke the order API's keys (see `order-svc keys --help`)",
		Run: func(ctx context.Context, args []string) error {
			fs := kit.NewFlagSet("order-svc keys", keysSummary)
			fs.SetOutput(out)
			return fs.Dispatch(ctx, args, []kit.Command{
				{Name: "create", Summary: "create a key and print it (once): --name N --scope orders:write[,orders:read] [--customer ID]",
					Run: func(ctx context.Context, args []string) error { return keys(ctx, "create", args, out) }},
				{Name: "list", Summary: "list the keys (never the keys themselves): [--all] [--json]",
					Run: func(ctx context.Context, args []string) error { return keys(ctx, "list", args, out) }},
				{Name: "revoke", Summary: "revoke key ID: its next request gets 401",
					Run: func(ctx context.Context, args []string) error { return keys(ctx, "revoke", args, out) }},
			})
		}}
}

func keys(ctx context.Context, cmd string, args []string, out io.Writer) error {
	usage := map[string]string{
		"create": "order-svc keys create --name NAME --scope SCOPE[,SCOPE] [--customer ID] [flags]",
		"list":   "order-svc keys list [--all] [--json] [flags]",
		"revoke": "order-svc keys revoke ID [flags]",
	}[cmd]
	fs := kit.NewFlagSet("order-svc keys "+cmd, keysSummary)
	fs.SetOutput(out)
	fs.SetUsage(usage)
	dbURL := fs.String("database-url", "ORDERS_DATABASE_URL", "", "PostgreSQL URL of the order service's database (required)")
	var name, scopes, customer *string
	var all, asJSON *bool
	switch cmd {
	case "create":
		name = fs.String("name", "", "", "who or what uses the key, e.g. loadgen (required)")
		scopes = fs.String("scope", "", "", "comma-separated scopes: orders:write (create orders), orders:read (read them) (required)")
		customer = fs.String("customer", "", "", "restrict the key to this customer_id: it creates and reads that customer's orders only")
	case "list":
		all = fs.Bool("all", "", false, "revoked keys too")
		asJSON = fs.Bool("json", "", false, "one JSON object per line instead of a table")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := kit.Require("database-url", *dbURL); err != nil {
		return kit.UsageError{Err: err}
	}
	var id int64
	var sc []apikey.Scope
	switch cmd {
	case "create":
		if fs.NArg() != 0 {
			return kit.Usagef("create: unexpected argument %q", fs.Arg(0))
		}
		for s := range strings.SplitSeq(*scopes, ",") {
			if s = strings.TrimSpace(s); s != "" {
				sc = append(sc, apikey.Scope(s))
			}
		}
		if err := apikey.Check(*name, sc, *customer); err != nil {
			return kit.UsageError{Err: err}
		}
	case "list":
		if fs.NArg() != 0 {
			return kit.Usagef("list: unexpected argument %q", fs.Arg(0))
		}
	case "revoke":
		if fs.NArg() != 1 {
			return kit.Usagef("revoke needs exactly one key id (see `order-svc keys list`)")
		}
		var err error
		if id, err = strconv.ParseInt(fs.Arg(0), 10, 64); err != nil || id < 1 {
			return kit.Usagef("key id %q: want a positive integer", fs.Arg(0))
		}
	}
	pool, err := pgxpool.New(ctx, *dbURL)
	if err != nil {
		return kit.Usagef("--database-url: %v", err)
	}
	defer pool.Close()
	// A key may be made before the service first ran.
	if err := orderstore.Migrate(ctx, pool); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	store := &orderstore.Store{Pool: pool}
	switch cmd {
	case "create":
		key, k, err := store.CreateKey(ctx, strings.TrimSpace(*name), sc, *customer)
		if err != nil {
			return err
		}
		// The key alone on standard output, for KEY=$(order-svc keys
		// create …); what it is on standard error.
		fmt.Fprintf(os.Stderr, "key %d (%s, scopes %s%s): shown this once, only its hash is stored\n",
			k.ID, k.Name, joinScopes(k.Scopes), customerNote(k.CustomerID))
		fmt.Fprintln(out, key)
		return nil
	case "revoke":
		if err := store.RevokeKey(ctx, id); err != nil {
			if errors.Is(err, orderstore.ErrNoSuchKey) {
				return kit.UsageError{Err: err}
			}
			return err
		}
		fmt.Fprintf(out, "key %d revoked\n", id)
		return nil
	}
	ks, err := store.Keys(ctx, *all)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		for _, k := range ks {
			if err := enc.Encode(k); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tSCOPES\tCUSTOMER\tCREATED_AT\tREVOKED_AT")
	for _, k := range ks {
		revoked := "-"
		if k.RevokedAt != nil {
			revoked = k.RevokedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, joinScopes(k.Scopes), cmp.Or(k.CustomerID, "-"),
			k.CreatedAt.UTC().Format(time.RFC3339), revoked)
	}
	return tw.Flush()
}

func joinScopes(sc []apikey.Scope) string {
	s := make([]string, len(sc))
	for i, x := range sc {
		s[i] = string(x)
	}
	return strings.Join(s, ",")
}

func customerNote(c string) string {
	if c == "" {
		return ""
	}
	return ", customer " + c
}
