package console_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/services/console"
)

// The orchestrator's tables with the columns seed 001's dashboard queries
// read (DESIGN.md names them); the orchestrator's own migrations create them.
const sagaTables = `
create table saga_executions (saga_id uuid primary key, status text not null, started_at timestamptz not null,
	completed_at timestamptz, error text);
create table saga_steps (saga_id uuid not null references saga_executions, step_name text not null, step_status text not null,
	step_error text, step_order int not null, created_at timestamptz not null default now());
insert into saga_executions values
	('00000000-0000-7000-8000-000000000001', 'COMPLETED', now() - interval '10 minutes', now() - interval '9 minutes', null),
	('00000000-0000-7000-8000-000000000002', 'FAILED', now() - interval '5 minutes', now() - interval '4 minutes', 'compensation of reserve_stock failed');
insert into saga_steps (saga_id, step_name, step_status, step_error, step_order) values
	('00000000-0000-7000-8000-000000000001', 'reserve_stock', 'executed', null, 1),
	('00000000-0000-7000-8000-000000000001', 'charge', 'executed', null, 2),
	('00000000-0000-7000-8000-000000000002', 'reserve_stock', 'executed', null, 1),
	('00000000-0000-7000-8000-000000000002', 'charge', 'failed', 'card declined', 2);`

func TestOrchestratedSagasRunSeed001sDashboardQueries(t *testing.T) {
	pool := testkit.NewPool(t, func(ctx context.Context, p *pgxpool.Pool) error {
		_, err := p.Exec(ctx, sagaTables)
		return err
	})
	rep, err := console.OrchestratedSagas{Pool: pool}.Report(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Sections) != 3 {
		t.Fatalf("%d sections; want the seed's three queries", len(rep.Sections))
	}
	byHour, failed, rate := rep.Sections[0], rep.Sections[1], rep.Sections[2]
	if len(byHour.Rows) != 2 || byHour.Chart == "" {
		t.Errorf("status by hour: %+v", byHour.Rows)
	}
	if len(failed.Rows) != 1 || failed.Rows[0].Cells[2] != "compensation of reserve_stock failed" ||
		!strings.Contains(failed.Rows[0].Cells[3], `"error": "card declined"`) {
		t.Errorf("failed sagas: %+v", failed.Rows)
	}
	if len(rate.Rows) != 2 || strings.Join(rate.Rows[0].Cells, " ") != "charge 2 1 1 50.00" {
		t.Errorf("failure rate per step: %+v", rate.Rows)
	}
}
