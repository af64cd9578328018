package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/infra/testkit/proc"
)

// backend is one server process of one of the run's databases.
type backend struct {
	pid int
	db  string
}

// dbLoad is this run's share of the PostgreSQL server: the CPU time of
// the backends connected to the run's databases and the transactions
// those databases ended. The server's whole tree (the "postgresql" line)
// also counts every other client of a shared server; this does not. A
// backend that ended during the run is missed (the services keep their
// pooled connections, so few do), and so is the server's shared work
// (WAL writer, checkpointer, autovacuum).
type dbLoad struct {
	adminURL string
	dbs      []string
	cpu      map[backend]time.Duration // CPU at the start
	xacts    map[string]int64          // database → commits and rollbacks at the start
}

func startDBLoad(ctx context.Context, c config) (*dbLoad, error) {
	l := &dbLoad{adminURL: c.adminURL}
	for _, u := range c.dbURLs {
		l.dbs = append(l.dbs, dbName(u))
	}
	slices.Sort(l.dbs)
	var err error
	if l.cpu, l.xacts, err = l.read(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// read takes the CPU of each backend of the run's databases and each
// database's transaction count.
func (l *dbLoad) read(ctx context.Context) (map[backend]time.Duration, map[string]int64, error) {
	conn, err := pgx.Connect(ctx, l.adminURL)
	if err != nil {
		return nil, nil, fmt.Errorf("connect %s: %w", l.adminURL, err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `select pid, datname from pg_stat_activity where datname = any($1)`, l.dbs)
	if err != nil {
		return nil, nil, err
	}
	backends, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (b backend, err error) {
		return b, r.Scan(&b.pid, &b.db)
	})
	if err != nil {
		return nil, nil, err
	}
	cpu := make(map[backend]time.Duration, len(backends))
	for _, b := range backends {
		if u, err := proc.ReadUsage(b.pid); err == nil { // it may have ended since
			cpu[b] = u.CPU
		}
	}
	// Statistics reach pg_stat_database when a backend goes idle, at most
	// a second late; the report runs after the saga has been quiet.
	rows, err = conn.Query(ctx, `select datname, xact_commit + xact_rollback from pg_stat_database where datname = any($1)`, l.dbs)
	if err != nil {
		return nil, nil, err
	}
	xacts := map[string]int64{}
	for rows.Next() {
		var db string
		var n int64
		if err := rows.Scan(&db, &n); err != nil {
			return nil, nil, err
		}
		xacts[db] = n
	}
	return cpu, xacts, rows.Err()
}

// print reports the run's backends' CPU and each database's transactions
// per 1,000 orders.
func (l *dbLoad) print(ctx context.Context, orders int) {
	if orders == 0 {
		return
	}
	cpu, xacts, err := l.read(ctx)
	if err != nil {
		fmt.Printf("    (this run's PostgreSQL backends not measured: %v)\n", err)
		return
	}
	var spent time.Duration
	byDB := map[string]time.Duration{}
	for b, now := range cpu {
		d := now - l.cpu[b] // a backend opened during the run starts at zero
		spent += d
		byDB[b.db] += d
	}
	perOrder := func(n float64) float64 { return n * 1000 / float64(orders) }
	var cpus, per []string
	var total int64
	for _, db := range l.dbs {
		if d := byDB[db]; d > 0 {
			cpus = append(cpus, fmt.Sprintf("%s %.2f", db, perOrder(d.Seconds())))
		}
		if n := xacts[db] - l.xacts[db]; n > 0 {
			total += n
			per = append(per, fmt.Sprintf("%s %.0f", db, perOrder(float64(n))))
		}
	}
	fmt.Printf("    %-22s %7.2f CPU-s  (backends of this run's databases only: %s)\n", "postgresql, this run", perOrder(spent.Seconds()), strings.Join(cpus, ", "))
	fmt.Printf("  transactions per 1,000 terminal orders: %.0f (%s)\n", perOrder(float64(total)), strings.Join(per, ", "))
}
