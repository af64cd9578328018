package orchestratorstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/backoff"
)

// Errors of the review commands.
var (
	ErrReviewNotFound  = errors.New("no such review entry")
	ErrReviewResolved  = errors.New("review entry already resolved")
	ErrResolutionEmpty = errors.New("a resolution needs who resolved it and a note")
)

// Review is the entry a FAILED saga leaves for an operator.
type Review struct {
	ID          int64      `json:"id"`
	SagaID      string     `json:"saga_id"`
	OrderID     string     `json:"order_id"`
	FailedSteps []string   `json:"failed_steps"`
	Reason      string     `json:"reason"`
	CreatedAt   time.Time  `json:"created_at"`
	AlertedAt   *time.Time `json:"alerted_at,omitempty"`
	ResolvedAt  *time.Time `json:"resolved_at,omitempty"`
	ResolvedBy  *string    `json:"resolved_by,omitempty"`
	Resolution  *string    `json:"resolution,omitempty"`
}

// Reviews lists review entries, newest first: only unresolved ones when
// open.
func Reviews(ctx context.Context, pool *pgxpool.Pool, open bool) ([]Review, error) {
	rows, err := pool.Query(ctx, `select id, saga_id, order_id, failed_steps, reason, created_at, alerted_at, resolved_at, resolved_by, resolution
		from saga_reviews where not $1 or resolved_at is null order by id desc`, open)
	if err != nil {
		return nil, fmt.Errorf("reviews: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Review])
}

// Resolve closes review entry id, recording who did and what they did
// (refunded by hand, cancelled the shipment with the carrier…). The saga
// stays FAILED: the entry says a person took over.
func Resolve(ctx context.Context, pool *pgxpool.Pool, id int64, by, note string) error {
	if by == "" || note == "" {
		return ErrResolutionEmpty
	}
	var resolved *time.Time
	err := pool.QueryRow(ctx, `with cur as (select id, resolved_at from saga_reviews where id = $1 for update)
		update saga_reviews r set resolved_at = coalesce(cur.resolved_at, now()),
			resolved_by = case when cur.resolved_at is null then $2 else r.resolved_by end,
			resolution = case when cur.resolved_at is null then $3 else r.resolution end
		from cur where r.id = cur.id returning cur.resolved_at`, id, by, note).Scan(&resolved)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: %d", ErrReviewNotFound, id)
	case err != nil:
		return fmt.Errorf("resolve review %d: %w", id, err)
	case resolved != nil:
		return fmt.Errorf("%w: %d at %s", ErrReviewResolved, id, resolved.Format(time.RFC3339))
	}
	return nil
}

// Alerter raises the alert of every new review entry once: an error log
// line always, and a POST of the entry (JSON) to WebhookURL when set,
// retried with backoff until the webhook answers 2xx. Entries are taken
// with FOR UPDATE SKIP LOCKED, so two instances never alert one twice at
// the same time.
type Alerter struct {
	Pool       *pgxpool.Pool
	WebhookURL string
	Client     *http.Client // default: 5s timeout
	Log        *slog.Logger
	Metrics    *Metrics
	Interval   time.Duration // default 1s
}

// Run alerts until ctx is done.
func (a *Alerter) Run(ctx context.Context) error {
	if a.Client == nil {
		a.Client = &http.Client{Timeout: 5 * time.Second}
	}
	if a.Interval <= 0 {
		a.Interval = time.Second
	}
	t := time.NewTicker(a.Interval)
	defer t.Stop()
	for {
		if err := a.Once(ctx); err != nil && ctx.Err() == nil {
			a.Log.Warn("saga alerts", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Once alerts the entries that are due.
func (a *Alerter) Once(ctx context.Context) error {
	return pgx.BeginFunc(ctx, a.Pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `select id, saga_id, order_id, failed_steps, reason, created_at, alerted_at, resolved_at, resolved_by, resolution
			from saga_reviews where alerted_at is null and next_alert_at <= now() order by id limit 20 for update skip locked`)
		if err != nil {
			return err
		}
		due, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Review])
		if err != nil {
			return err
		}
		for _, r := range due {
			a.Log.Error("ALERT saga FAILED: compensation exhausted, review needed", "review_id", r.ID, "saga_id", r.SagaID,
				"order_id", r.OrderID, "failed_steps", r.FailedSteps, "reason", r.Reason)
			outcome := "logged"
			if a.WebhookURL != "" {
				outcome = "sent"
				if err := a.post(ctx, r); err != nil {
					a.Metrics.alerted("failed")
					var n int
					if err := tx.QueryRow(ctx, `update saga_reviews set alert_attempts = alert_attempts + 1 where id = $1 returning alert_attempts`, r.ID).Scan(&n); err != nil {
						return err
					}
					wait := backoff.Exponential(n, time.Second, 5*time.Minute)
					a.Log.Warn("alert webhook failed", "review_id", r.ID, "err", err, "retry_in", wait)
					if _, err := tx.Exec(ctx, `update saga_reviews set next_alert_at = now() + $2::interval where id = $1`, r.ID, wait); err != nil {
						return err
					}
					continue
				}
			}
			a.Metrics.alerted(outcome)
			if _, err := tx.Exec(ctx, `update saga_reviews set alerted_at = now(), alert_attempts = alert_attempts + 1 where id = $1`, r.ID); err != nil {
				return err
			}
		}
		return nil
	})
}

func (a *Alerter) post(ctx context.Context, r Review) error {
	body, _ := json.Marshal(map[string]any{"alert": "saga_failed", "review": r})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.Client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook answered %s", resp.Status)
	}
	return nil
}
