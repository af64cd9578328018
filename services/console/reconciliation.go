package console

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/services/reconciler"
	"github.com/concordhq/concord/services/reconciler/reconcilerstore"
)

// VerdictKind counts findings of one verdict and kind.
type VerdictKind struct {
	Verdict, Kind string
	Open, Total   int64
}

// ReconciliationData is the reconciliation page.
type ReconciliationData struct {
	Status   reconciler.Status
	Since    map[string]string // per job: time since the last completed cycle
	Counts   []VerdictKind
	Chart    template.HTML
	Findings []reconciler.Finding
	ShowAll  bool
}

func (s *Server) reconciliationPage(r *http.Request) (any, error) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	store := reconcilerstore.New(s.cfg.Payments.Pool)
	var d ReconciliationData
	var err error
	// Seed 000's lag query: the longest time any payment went unverified.
	if d.Status, err = store.Status(ctx); err != nil {
		return d, err
	}
	d.Since = map[string]string{}
	for _, c := range d.Status.Cursors {
		if c.LastCycleCompletedAt != nil {
			d.Since[c.Job] = FormatDuration(d.Status.Now.Sub(*c.LastCycleCompletedAt))
		}
	}
	rows, err := s.cfg.Payments.Pool.Query(ctx, `select verdict, kind, count(*) filter (where resolved_at is null), count(*)
		from reconciliation_findings group by 1, 2 order by 1, 2`)
	if err != nil {
		return d, fmt.Errorf("findings by verdict and kind: %w", err)
	}
	var vk VerdictKind
	var labels []string
	open, closed := Series{Name: "open"}, Series{Name: "resolved"}
	if _, err := pgx.ForEachRow(rows, []any{&vk.Verdict, &vk.Kind, &vk.Open, &vk.Total}, func() error {
		d.Counts = append(d.Counts, vk)
		labels = append(labels, vk.Verdict+" / "+vk.Kind)
		open.Values = append(open.Values, float64(vk.Open))
		closed.Values = append(closed.Values, float64(vk.Total-vk.Open))
		return nil
	}); err != nil {
		return d, fmt.Errorf("findings by verdict and kind: %w", err)
	}
	if len(labels) > 0 {
		d.Chart = BarChart("findings by verdict and kind", labels, []Series{open, closed})
	}
	d.ShowAll = r.URL.Query().Get("all") != ""
	d.Findings, err = store.Findings(ctx, reconcilerstore.FindingFilter{All: d.ShowAll, Limit: 200})
	return d, err
}

// FindingData is one finding with the payment as it stands now.
type FindingData struct {
	Finding reconciler.Finding
	Payment PaymentSummary
	Amount  int64
	Curr    string
}

func (s *Server) findingPage(r *http.Request) (any, error) {
	id, err := pathID(r, "id")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	var d FindingData
	d.Finding, err = reconcilerstore.New(s.cfg.Payments.Pool).Finding(ctx, id)
	if errors.Is(err, reconciler.ErrFindingNotFound) {
		return nil, notFound("there is no finding %d", id)
	}
	if err != nil {
		return nil, err
	}
	p := &d.Payment
	err = s.cfg.Payments.Pool.QueryRow(ctx, `select id, status, coalesce(provider_payment_id, ''), coalesce(observed_external_status, ''),
			attempts, coalesce(last_error, ''), coalesce(last_source, ''), last_reconciled_at, coalesce(refund_id, ''), amount, currency
		from payments where id = $1`, d.Finding.PaymentID).Scan(&p.ID, &p.Status, &p.ProviderID, &p.ProviderStatus, &p.Attempts,
		&p.LastError, &p.LastSource, &p.LastReconciledAt, &p.RefundID, &d.Amount, &d.Curr)
	if err != nil {
		return nil, fmt.Errorf("payment %d of finding %d: %w", d.Finding.PaymentID, id, err)
	}
	return d, nil
}

// findingResolve is `reconciler findings resolve ID --note N`.
func (s *Server) findingResolve(r *http.Request, actor string) (AuditEntry, string, error) {
	id, err := pathID(r, "id")
	if err != nil {
		return AuditEntry{}, "", err
	}
	note := strings.TrimSpace(r.PostForm.Get("note"))
	if note == "" {
		return AuditEntry{}, "", badRequest("note: say what was done about finding %d (it is stored with the finding)", id)
	}
	err = reconcilerstore.New(s.cfg.Payments.Pool).Resolve(r.Context(), id, actor, note)
	switch {
	case errors.Is(err, reconciler.ErrFindingNotFound):
		return AuditEntry{}, "", notFound("there is no finding %d; nothing was changed", id)
	case errors.Is(err, reconciler.ErrFindingResolved):
		return AuditEntry{}, "", conflict("finding %d is already resolved (by another operator or by its repair); nothing was changed", id)
	case err != nil:
		return AuditEntry{}, "", err
	}
	return AuditEntry{Service: s.cfg.Payments.Name, Target: "finding " + strconv.FormatInt(id, 10), Reason: note},
		fmt.Sprintf("finding %d resolved", id), nil
}

func (s *Server) auditPage(r *http.Request) (any, error) {
	return RecentAudit(r.Context(), s.cfg.Audit, 200)
}
