package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/concordhq/concord/services/audit"
	"github.com/concordhq/concord/services/orchestrator/orchestratorstore"
)

// sagaSummary prints the orchestrated sagas: seed 001's three dashboard
// queries as the orchestrator's tables answer them, and the checks of the
// orchestrator's own promises.
func sagaSummary(ctx context.Context, r *running) ([]audit.Result, error) {
	pool := r.pools["orchestrator"]
	fmt.Println("  orchestrated sagas: seed 001's dashboard queries")
	for i, q := range orchestratorstore.DashboardQueries {
		rows, err := pool.Query(ctx, q.SQL)
		if err != nil {
			return nil, fmt.Errorf("dashboard query %d: %w", i+1, err)
		}
		var cols []string
		for _, f := range rows.FieldDescriptions() {
			cols = append(cols, f.Name)
		}
		fmt.Printf("    %d. %s\n       %s\n", i+1, q.Title, strings.Join(cols, " | "))
		n := 0
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				rows.Close()
				return nil, err
			}
			n++
			if n > 5 {
				continue // counted, not printed
			}
			cells := make([]string, len(vals))
			for j, v := range vals {
				cells[j] = cell(v)
			}
			fmt.Printf("       %s\n", strings.Join(cells, " | "))
		}
		if n > 5 {
			fmt.Printf("       … %d rows in all\n", n)
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
		if n == 0 {
			fmt.Println("       (no rows)")
		}
	}

	// Every saga terminal; FAILED only with a review entry; an
	// orchestrated order confirmed exactly when its saga completed.
	terminal := audit.Result{Check: "every saga terminal"}
	open, err := collect[string, string](ctx, r, "orchestrator", `select saga_id, status from saga_executions
		where status not in ('COMPLETED', 'COMPENSATED', 'FAILED')`)
	if err != nil {
		return nil, err
	}
	for id, st := range open {
		terminal.Violations = append(terminal.Violations, audit.Violation{Subject: "saga " + id, Problem: "still " + st})
	}
	total := count(ctx, r, "orchestrator", `select count(*) from saga_executions`)
	terminal.Summary = fmt.Sprintf("%d sagas", total)
	reviewed := audit.Result{Check: "FAILED sagas only with a review entry"}
	unreviewed, err := collect[string, string](ctx, r, "orchestrator", `select e.saga_id, coalesce(e.error, '') from saga_executions e
		left join saga_reviews v on v.saga_id = e.saga_id where e.status = 'FAILED' and v.id is null`)
	if err != nil {
		return nil, err
	}
	for id, e := range unreviewed {
		reviewed.Violations = append(reviewed.Violations, audit.Violation{Subject: "saga " + id, Problem: "FAILED without a review entry: " + e})
	}
	reviewed.Summary = fmt.Sprintf("%d FAILED, %d reviews open", count(ctx, r, "orchestrator", `select count(*) from saga_executions where status = 'FAILED'`),
		count(ctx, r, "orchestrator", `select count(*) from saga_reviews where resolved_at is null`))
	outcome := audit.Result{Check: "orchestrated orders end as their sagas"}
	sagas, err := collect[string, string](ctx, r, "orchestrator", `select saga_id, status from saga_executions`)
	if err != nil {
		return nil, err
	}
	orders, err := collect[string, string](ctx, r, "order-svc", `select id::text, status from orders where flow = 'orchestrated'`)
	if err != nil {
		return nil, err
	}
	for id, st := range orders {
		want := map[string]string{"COMPLETED": "CONFIRMED", "COMPENSATED": "CANCELLED", "FAILED": "CANCELLED"}[sagas[id]]
		if st != want {
			outcome.Violations = append(outcome.Violations, audit.Violation{Subject: "order " + id,
				Problem: fmt.Sprintf("%s, its saga %q", st, sagas[id])})
		}
	}
	outcome.Summary = fmt.Sprintf("%d orchestrated orders", len(orders))
	return []audit.Result{terminal, reviewed, outcome}, nil
}

// cell prints one value of a dashboard row: times to the second, numerics
// with two decimals, JSON as JSON.
func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return "-"
	case time.Time:
		return x.UTC().Format("2006-01-02 15:04:05")
	case pgtype.Numeric:
		f, err := x.Float64Value()
		if err != nil || !f.Valid {
			return "-"
		}
		return strconv.FormatFloat(f.Float64, 'f', 2, 64)
	case map[string]any, []any:
		b, _ := json.Marshal(x)
		return string(b)
	}
	return fmt.Sprint(v)
}
