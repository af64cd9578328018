package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/concordhq/concord/services/orchestrator/orchestratorstore"
)

// sagaSummary prints the orchestrated sagas: seed 001's three dashboard
// queries as the orchestrator's tables answer them. The checks of both
// flows are audit.Saga's.
func sagaSummary(ctx context.Context, r *running) error {
	pool := r.pools["orchestrator"]
	fmt.Println("  orchestrated sagas: seed 001's dashboard queries")
	for i, q := range orchestratorstore.DashboardQueries {
		rows, err := pool.Query(ctx, q.SQL)
		if err != nil {
			return fmt.Errorf("dashboard query %d: %w", i+1, err)
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
				return err
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
			return err
		}
		if n == 0 {
			fmt.Println("       (no rows)")
		}
	}

	return nil
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
