package console

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SagaSource is one kind of saga the Sagas page reports on. The
// choreographed orders are one; the orchestrated saga's executions and
// steps are another, added beside it without touching the page.
type SagaSource interface {
	Report(ctx context.Context) (SagaReport, error)
}

// SagaReport is one saga source's part of the Sagas page.
type SagaReport struct {
	Title    string
	Sections []SagaSection
}

// SagaSection is a chart and/or a table.
type SagaSection struct {
	Title   string
	Chart   template.HTML
	Columns []string
	Rows    []SagaRow
	Empty   string // said when there are no rows
}

// SagaRow is one table row; Link, when set, makes the first cell a link.
type SagaRow struct {
	Cells []string
	Link  string
}

// HourStatus is one (hour, status) cell of a "status by hour" report.
type HourStatus struct {
	Hour        time.Time
	Status      string
	Count       int64
	AvgDuration *float64 // seconds; nil while none has finished
}

// statusByHourSection draws HourStatus rows as stacked bars per hour and a table.
func statusByHourSection(title string, rows []HourStatus) SagaSection {
	sec := SagaSection{Title: title, Columns: []string{"hour", "status", "count", "avg duration"}, Empty: "nothing in the last 24 hours"}
	var hours []time.Time
	hourIdx := map[time.Time]int{}
	var statuses []string
	statusIdx := map[string]int{}
	for _, r := range rows {
		if _, ok := hourIdx[r.Hour]; !ok {
			hourIdx[r.Hour] = len(hours)
			hours = append(hours, r.Hour)
		}
		if _, ok := statusIdx[r.Status]; !ok {
			statusIdx[r.Status] = len(statuses)
			statuses = append(statuses, r.Status)
		}
		avg := "—"
		if r.AvgDuration != nil {
			avg = FormatDuration(time.Duration(*r.AvgDuration * float64(time.Second)))
		}
		sec.Rows = append(sec.Rows, SagaRow{Cells: []string{r.Hour.UTC().Format("2006-01-02 15:00"), r.Status, strconv.FormatInt(r.Count, 10), avg}})
	}
	if len(rows) == 0 {
		return sec
	}
	sort.Slice(hours, func(i, j int) bool { return hours[i].Before(hours[j]) })
	for i, h := range hours {
		hourIdx[h] = i
	}
	labels := make([]string, len(hours))
	for i, h := range hours {
		labels[i] = h.UTC().Format("15:00")
	}
	series := make([]Series, len(statuses))
	for i, st := range statuses {
		series[i] = Series{Name: st, Values: make([]float64, len(hours))}
	}
	for _, r := range rows {
		series[statusIdx[r.Status]].Values[hourIdx[r.Hour]] += float64(r.Count)
	}
	sec.Chart = BarChart(title, labels, series)
	return sec
}

// ChoreographedSagas reports on the orders of the choreographed saga
// (order-svc's orders table): the same three questions seed 001's
// dashboard asks of the orchestrated saga, in the orders' terms.
type ChoreographedSagas struct {
	Pool *pgxpool.Pool
}

// Report implements SagaSource.
func (c ChoreographedSagas) Report(ctx context.Context) (SagaReport, error) {
	rep := SagaReport{Title: "Choreographed orders"}
	rows, err := c.Pool.Query(ctx, `select date_trunc('hour', created_at) as hour, status, count(*),
			avg(extract(epoch from (terminal_at - created_at)))::float8
		from orders where created_at >= now() - interval '24 hours'
		group by 1, 2 order by 1 desc, 2`)
	if err != nil {
		return rep, fmt.Errorf("orders by hour: %w", err)
	}
	hs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (HourStatus, error) {
		var h HourStatus
		err := r.Scan(&h.Hour, &h.Status, &h.Count, &h.AvgDuration)
		return h, err
	})
	if err != nil {
		return rep, fmt.Errorf("orders by hour: %w", err)
	}
	rep.Sections = append(rep.Sections, statusByHourSection("orders by status per hour, with the average time to terminal", hs))

	reasons := SagaSection{Title: "cancellation reasons", Columns: []string{"reason", "orders"}, Empty: "no cancelled orders"}
	rows, err = c.Pool.Query(ctx, `select coalesce(reason, '(none)'), count(*) from orders
		where status = 'CANCELLED' group by 1 order by 2 desc, 1`)
	if err != nil {
		return rep, fmt.Errorf("cancellation reasons: %w", err)
	}
	var labels []string
	var counts []float64
	var reason string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&reason, &n}, func() error {
		labels, counts = append(labels, reason), append(counts, float64(n))
		reasons.Rows = append(reasons.Rows, SagaRow{Cells: []string{reason, strconv.FormatInt(n, 10)}})
		return nil
	}); err != nil {
		return rep, fmt.Errorf("cancellation reasons: %w", err)
	}
	if len(labels) > 0 {
		reasons.Chart = BarChart("cancellation reasons", labels, []Series{{Name: "cancelled orders", Values: counts}})
	}
	rep.Sections = append(rep.Sections, reasons)

	pct := SagaSection{Title: "time to terminal", Columns: []string{"status", "orders", "p50", "p90", "p99", "max"}, Empty: "no terminal orders"}
	rows, err = c.Pool.Query(ctx, `select status, count(*),
			percentile_cont(array[0.5, 0.9, 0.99]) within group (order by extract(epoch from terminal_at - created_at))::float8[],
			max(extract(epoch from terminal_at - created_at))::float8
		from orders where terminal_at is not null group by 1 order by 1`)
	if err != nil {
		return rep, fmt.Errorf("time to terminal: %w", err)
	}
	var status string
	var ps []float64
	var mx float64
	if _, err := pgx.ForEachRow(rows, []any{&status, &n, &ps, &mx}, func() error {
		cells := []string{status, strconv.FormatInt(n, 10)}
		for _, p := range append(ps, mx) {
			cells = append(cells, FormatDuration(time.Duration(p*float64(time.Second))))
		}
		pct.Rows = append(pct.Rows, SagaRow{Cells: cells})
		return nil
	}); err != nil {
		return rep, fmt.Errorf("time to terminal: %w", err)
	}
	rep.Sections = append(rep.Sections, pct)

	recent := SagaSection{Title: "latest cancelled orders", Columns: []string{"order", "reason", "created", "took"}, Empty: "no cancelled orders"}
	rows, err = c.Pool.Query(ctx, `select id::text, coalesce(reason, ''), created_at, terminal_at - created_at
		from orders where status = 'CANCELLED' order by created_at desc limit 10`)
	if err != nil {
		return rep, fmt.Errorf("latest cancelled orders: %w", err)
	}
	var id string
	var created time.Time
	var took *time.Duration
	if _, err := pgx.ForEachRow(rows, []any{&id, &reason, &created, &took}, func() error {
		recent.Rows = append(recent.Rows, SagaRow{Cells: []string{id, reason, created.UTC().Format("2006-01-02 15:04:05"), fmtDurPtr(took)},
			Link: "/timeline?q=" + id})
		return nil
	}); err != nil {
		return rep, fmt.Errorf("latest cancelled orders: %w", err)
	}
	rep.Sections = append(rep.Sections, recent)
	return rep, nil
}

// OrchestratedSagas runs seed 001's three dashboard queries, as written,
// against the orchestrator's saga_executions and saga_steps.
type OrchestratedSagas struct {
	Pool *pgxpool.Pool
}

// Report implements SagaSource.
func (o OrchestratedSagas) Report(ctx context.Context) (SagaReport, error) {
	rep := SagaReport{Title: "Orchestrated sagas"}
	rows, err := o.Pool.Query(ctx, `SELECT
    date_trunc('hour', started_at) AS hour,
    status,
    COUNT(*) AS count,
    AVG(EXTRACT(EPOCH FROM (completed_at - started_at)))::float8 AS avg_duration_seconds
FROM saga_executions
WHERE started_at >= NOW() - INTERVAL '24 hours'
GROUP BY 1, 2
ORDER BY 1 DESC, 2`)
	if err != nil {
		return rep, fmt.Errorf("sagas by hour: %w", err)
	}
	hs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (HourStatus, error) {
		var h HourStatus
		err := r.Scan(&h.Hour, &h.Status, &h.Count, &h.AvgDuration)
		return h, err
	})
	if err != nil {
		return rep, fmt.Errorf("sagas by hour: %w", err)
	}
	rep.Sections = append(rep.Sections, statusByHourSection("sagas by status per hour, with the average duration", hs))

	failed := SagaSection{Title: "FAILED sagas (last 7 days) with their steps", Columns: []string{"saga", "started", "error", "steps"}, Empty: "no failed sagas"}
	rows, err = o.Pool.Query(ctx, `SELECT
    e.saga_id::text,
    e.started_at,
    coalesce(e.error, ''),
    jsonb_agg(
        jsonb_build_object(
            'step', step_name,
            'status', step_status,
            'error', step_error
        ) ORDER BY step_order
    )::text AS step_details
FROM saga_executions e
JOIN saga_steps s ON e.saga_id = s.saga_id
WHERE e.status = 'FAILED'
  AND e.started_at >= NOW() - INTERVAL '7 days'
GROUP BY e.saga_id, e.started_at, e.error
ORDER BY e.started_at DESC`)
	if err != nil {
		return rep, fmt.Errorf("failed sagas: %w", err)
	}
	var id, msg, steps string
	var started time.Time
	if _, err := pgx.ForEachRow(rows, []any{&id, &started, &msg, &steps}, func() error {
		failed.Rows = append(failed.Rows, SagaRow{Cells: []string{id, started.UTC().Format("2006-01-02 15:04:05"), msg, steps}})
		return nil
	}); err != nil {
		return rep, fmt.Errorf("failed sagas: %w", err)
	}
	rep.Sections = append(rep.Sections, failed)

	rate := SagaSection{Title: "failure rate per step (last 7 days)", Columns: []string{"step", "executions", "successes", "failures", "failure rate %"}, Empty: "no steps"}
	rows, err = o.Pool.Query(ctx, `SELECT
    step_name,
    COUNT(*) AS total_executions,
    SUM(CASE WHEN step_status = 'executed' THEN 1 ELSE 0 END) AS successes,
    SUM(CASE WHEN step_status != 'executed' THEN 1 ELSE 0 END) AS failures,
    ROUND(
        100.0 * SUM(CASE WHEN step_status != 'executed' THEN 1 ELSE 0 END) / COUNT(*),
        2
    )::float8 AS failure_rate_pct
FROM saga_steps
WHERE created_at >= NOW() - INTERVAL '7 days'
GROUP BY step_name
ORDER BY failure_rate_pct DESC`)
	if err != nil {
		return rep, fmt.Errorf("failure rate per step: %w", err)
	}
	var step string
	var total, ok, bad int64
	var pct float64
	var labels []string
	var vals []float64
	if _, err := pgx.ForEachRow(rows, []any{&step, &total, &ok, &bad, &pct}, func() error {
		rate.Rows = append(rate.Rows, SagaRow{Cells: []string{step, strconv.FormatInt(total, 10), strconv.FormatInt(ok, 10),
			strconv.FormatInt(bad, 10), strconv.FormatFloat(pct, 'f', 2, 64)}})
		labels, vals = append(labels, step), append(vals, pct)
		return nil
	}); err != nil {
		return rep, fmt.Errorf("failure rate per step: %w", err)
	}
	if len(labels) > 0 {
		rate.Chart = BarChart("failure rate per step (%)", labels, []Series{{Name: "failure rate %", Values: vals}})
	}
	rep.Sections = append(rep.Sections, rate)
	return rep, nil
}

func (s *Server) sagas(r *http.Request) (any, error) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	var out []SagaReport
	for _, src := range s.cfg.Sagas {
		rep, err := src.Report(ctx)
		if err != nil {
			return out, err
		}
		out = append(out, rep)
	}
	return out, nil
}
