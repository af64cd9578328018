// Command console serves the operations web UI over the services'
// databases and the broker: overview, sagas, an order's timeline, parked
// outbox rows, dead letters and reconciliation, with operator actions that
// go through the same packages as the relay, replay and reconciler CLIs.
//
//	console [flags]                 serve the UI
//	console hash-password           read a password on stdin, print its bcrypt hash for the users file
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/services/console"
)

func main() {
	kit.Main("console", func(ctx context.Context, args []string) error {
		if len(args) > 0 && args[0] == "hash-password" {
			return hashPassword(os.Stdin, os.Stdout)
		}
		return run(ctx, args)
	})
}

func hashPassword(in io.Reader, out io.Writer) error {
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	h, err := console.HashPassword(strings.TrimRight(line, "\r\n"))
	if err != nil {
		return kit.UsageError{Err: err}
	}
	_, err = fmt.Fprintln(out, h)
	return err
}

func run(ctx context.Context, args []string) error {
	fs := kit.NewFlagSet("console", "console serves the operations web UI over the services' databases and the broker.\n"+
		"Users come from --users-file and/or --users; `console hash-password` prints the hash to put there.")
	lf := kit.AddLogFlags(fs)
	kf := kit.AddKafkaFlags(fs)
	addr := fs.String("http-addr", "CONSOLE_HTTP_ADDR", "127.0.0.1:8090", "listen address of the UI, /metrics, /healthz and /readyz")
	auditURL := fs.String("database-url", "CONSOLE_DATABASE_URL", "", "the console's own database (its audit log); migrated at start")
	ordersURL := fs.String("orders-database-url", "ORDERS_DATABASE_URL", "", "order-svc's database; the console changes only its parked outbox rows and dead letters, through relay/outbox and consumers/replay")
	invURL := fs.String("inventory-database-url", "INVENTORY_DATABASE_URL", "", "inventory-svc's database (its parked outbox rows and dead letters, as above)")
	payURL := fs.String("payments-database-url", "PAYMENTS_DATABASE_URL", "", "payment-svc's database with the reconciler's tables (findings are resolved through reconcilerstore)")
	orchURL := fs.String("orchestrator-database-url", "ORCHESTRATOR_DATABASE_URL", "",
		"the orchestrator's database (saga_executions, saga_steps); empty: the Sagas page shows the choreographed orders only")
	usersFile := fs.String("users-file", "CONSOLE_USERS_FILE", "", `users, one a line: "name role bcrypt-hash" (role: read-only or operator)`)
	usersInline := fs.String("users", "CONSOLE_USERS", "", `users inline, "name:role:bcrypt-hash" comma-separated (usually from the environment)`)
	sessionKey := fs.String("session-key", "CONSOLE_SESSION_KEY", "",
		"key signing session cookies, at least 32 characters; empty: a random key, so sessions end when the console stops")
	sessionTTL := fs.Duration("session-ttl", "CONSOLE_SESSION_TTL", 8*time.Hour, "how long a login lasts")
	genAdmin := fs.Bool("generate-admin", "", false,
		"add an operator named admin with a random password printed at start (a local stack's convenience; never in production)")
	grace := fs.Duration("shutdown-grace", "SHUTDOWN_GRACE", 10*time.Second, "how long in-flight requests may take after SIGTERM")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := kit.Require("database-url", *auditURL, "orders-database-url", *ordersURL,
		"inventory-database-url", *invURL, "payments-database-url", *payURL); err != nil {
		return kit.UsageError{Err: err}
	}
	log, stopTracing, err := lf.Start(ctx, os.Stderr, "console")
	if err != nil {
		return err
	}
	defer stopTracing()
	users, err := console.LoadUsers(*usersFile, func(p string) (io.ReadCloser, error) { return os.Open(p) }, *usersInline)
	if err != nil {
		return kit.UsageError{Err: err}
	}
	if *genAdmin {
		pw := randomString(18)
		hash, err := console.HashPassword(pw)
		if err != nil {
			return err
		}
		extra, err := console.ParseUsersEnv("admin:operator:" + hash)
		if err != nil {
			return err
		}
		users["admin"] = extra["admin"]
		fmt.Fprintf(os.Stderr, "console: user admin (operator), password %s\n", pw)
	}
	if len(users) == 0 {
		return kit.Usagef("no users: give --users-file or --users (or --generate-admin on a local stack)")
	}
	key := []byte(*sessionKey)
	if len(key) == 0 {
		key = []byte(randomString(48))
	} else if len(key) < 32 {
		return kit.Usagef("--session-key: at least 32 characters, found %d", len(key))
	}

	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pools := map[string]string{"database-url": *auditURL, "orders-database-url": *ordersURL,
		"inventory-database-url": *invURL, "payments-database-url": *payURL}
	if *orchURL != "" {
		pools["orchestrator-database-url"] = *orchURL
	}
	opened := map[string]*pgxpool.Pool{}
	for flag, url := range pools {
		p, err := kit.NewPool(startCtx, url)
		if err != nil {
			return fmt.Errorf("--%s: %w", flag, err)
		}
		defer p.Close()
		opened[flag] = p
	}
	if err := console.Migrate(startCtx, opened["database-url"]); err != nil {
		return err
	}
	ops, err := kit.NewOpsServer(*addr, func(ctx context.Context) error { return opened["payments-database-url"].Ping(ctx) })
	if err != nil {
		return err
	}
	for flag, p := range opened {
		name := strings.TrimSuffix(flag, "-database-url") // orders, inventory, …
		if flag == "database-url" {
			name = "console"
		}
		if err := kit.RegisterPool(ops.Registry, name, p); err != nil {
			return err
		}
	}
	kc, err := kit.NewKafkaClient(startCtx, kf.Config(), log, kgo.ProducerLinger(0), kit.KafkaMetrics(ops.Registry, "console", nil))
	if err != nil {
		return err
	}
	defer kc.Close()
	cfg := console.Config{
		Orders:     console.Service{Name: "order-svc", Pool: opened["orders-database-url"]},
		Inventory:  console.Service{Name: "inventory-svc", Pool: opened["inventory-database-url"]},
		Payments:   console.Service{Name: "payment-svc", Pool: opened["payments-database-url"]},
		Audit:      opened["database-url"],
		Admin:      kadm.NewClient(kc),
		Producer:   kc,
		Users:      users,
		Sessions:   console.Sessions{Key: key, TTL: *sessionTTL},
		Log:        log,
		Registerer: ops.Registry,
	}
	cfg.Sagas = []console.SagaSource{console.ChoreographedSagas{Pool: cfg.Orders.Pool}}
	if p, ok := opened["orchestrator-database-url"]; ok {
		cfg.Sagas = append(cfg.Sagas, console.OrchestratedSagas{Pool: p})
	}
	srv, err := console.New(cfg)
	if err != nil {
		return err
	}
	ops.Mux.Handle("/", srv)
	fmt.Fprintf(os.Stderr, "console: http://%s/\n", ops.Addr())
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return ops.Run(gctx, log, *grace) })
	return g.Wait()
}

func randomString(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b)[:n]
}
