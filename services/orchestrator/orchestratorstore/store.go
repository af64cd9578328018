// Package orchestratorstore keeps sagas in PostgreSQL (saga_executions,
// saga_steps, saga_reviews) and drives them: each input (a checkout
// request, a reply, a passed deadline) is decided by the orchestrator's
// state machine inside one transaction that holds the saga's row lock,
// stores the new state and appends the commands it sends to the outbox.
// A command therefore exists iff the state that sent it committed, and a
// restarted instance continues every saga from its rows.
package orchestratorstore

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/pgmigrate"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/orchestrator"
)

//go:embed migrations/*.sql
var migrations embed.FS

// VersionTable records which orchestrator migrations ran.
const VersionTable = "orchestrator_schema_version"

// Migrate creates or updates the saga tables.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return pgmigrate.ApplyDir(ctx, pool, VersionTable, migrations, "migrations")
}

// ErrUnknownSaga is wrapped for a reply naming a saga this database never
// started.
var ErrUnknownSaga = errors.New("reply for a saga that does not exist")

// Store drives the sagas of one definition.
type Store struct {
	Def *orchestrator.Definition
	// Outbox routes the commands the sweeper sends (the consumer's
	// handlers emit through the runner's); its TopicPrefix must match
	// the runner's.
	Outbox  outbox.Writer
	Metrics *Metrics
	Log     *slog.Logger
	// Now is the clock of decisions and deadlines; default time.Now.
	Now func() time.Time
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Store) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.New(slog.DiscardHandler)
}

// Start begins the saga a checkout request asks for, inside tx, and emits
// its first command through out. A request for a saga that exists already
// (a duplicate with a new event id) changes nothing.
func (s *Store) Start(ctx context.Context, tx pgx.Tx, out outbox.Emitter, causationID string, req contract.SagaCheckoutRequestedV1) error {
	input, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, err := orchestrator.CheckoutInput(input); err != nil {
		return s.reject(ctx, tx, rejection{eventID: causationID, eventType: contract.TypeSagaCheckoutRequested, sagaID: req.SagaID,
			reason: RejectBadRequest, err: err})
	}
	d := orchestrator.Start(s.Def, req.SagaID, s.now())
	tag, err := tx.Exec(ctx, `insert into saga_executions (saga_id, saga_name, order_id, status, input, started_at)
		values ($1, $2, $3, $4, $5, $6) on conflict (saga_id) do nothing`,
		req.SagaID, s.Def.Name, req.OrderID, orchestrator.StatusPending, input, d.Saga.StartedAt)
	if err != nil {
		return fmt.Errorf("saga %s: insert: %w", req.SagaID, err)
	}
	if tag.RowsAffected() == 0 {
		s.Metrics.absorbed(AbsorbedDuplicateStart)
		return nil
	}
	s.Metrics.started(s.Def.Name)
	return s.save(ctx, tx, out, d, row{orderID: req.OrderID, input: input}, causationID)
}

// Reply applies a participant's reply inside tx. The saga's row is locked
// first, so replies and the sweeper take turns on one saga however many
// instances run. A reply for an unknown saga or step, or for another
// command than the step's, is rejected (see reject); a repeated, late or
// early one is counted and absorbed.
func (s *Store) Reply(ctx context.Context, tx pgx.Tx, out outbox.Emitter, causationID string, r contract.SagaStepRepliedV1) error {
	sg, rw, ok, err := s.load(ctx, tx, r.SagaID)
	if err != nil {
		return err
	}
	rj := rejection{eventID: causationID, eventType: contract.TypeSagaStepReplied, sagaID: r.SagaID, step: r.Step, key: r.IdempotencyKey}
	if !ok {
		rj.reason, rj.err = RejectUnknownSaga, fmt.Errorf("%w: %s (reply to %s of step %s)", ErrUnknownSaga, r.SagaID, r.CommandType, r.Step)
		return s.reject(ctx, tx, rj)
	}
	in := orchestrator.Reply{Step: r.Step, CommandType: contract.Type(r.CommandType), Key: r.IdempotencyKey,
		Succeeded: r.Outcome == contract.SagaStepRepliedV1OutcomeSucceeded, Reason: r.Reason, Retryable: r.Retryable != nil && *r.Retryable,
		CommandID: r.CommandID,
		Details:   map[string]string{orchestrator.CtxProviderPaymentID: r.ProviderPaymentID, orchestrator.CtxShipmentID: r.ShipmentID}}
	d, err := orchestrator.OnReply(s.Def, sg, in, s.now())
	if err != nil {
		rj.reason, rj.err = RejectCommandMismatch, err
		if errors.Is(err, orchestrator.ErrUnknownStep) {
			rj.reason = RejectUnknownStep
		}
		return s.reject(ctx, tx, rj)
	}
	if !d.Changed {
		s.Metrics.absorbed(d.Absorbed)
		s.log().Info("reply absorbed", "saga_id", r.SagaID, "step", r.Step, "command", r.CommandType, "outcome", r.Outcome, "reason", d.Absorbed)
		return nil
	}
	return s.save(ctx, tx, out, d, rw, causationID)
}

// rejection is an input the orchestrator refuses.
type rejection struct {
	eventID      string
	eventType    contract.Type
	sagaID, step string
	key, reason  string
	err          error
}

// reject records a refused input in saga_rejected_inputs, in the
// consumer's transaction, and changes nothing else: no saga moves and no
// command goes out. The record is acknowledged, not dead-lettered: no
// retry or replay can make it valid, and the table shows it with its
// reason.
func (s *Store) reject(ctx context.Context, tx pgx.Tx, r rejection) error {
	if _, err := tx.Exec(ctx, `insert into saga_rejected_inputs (event_id, event_type, saga_id, step, idempotency_key, reason, error)
		values ($1, $2, nullif($3, ''), nullif($4, ''), nullif($5, ''), $6, $7)`,
		r.eventID, r.eventType, r.sagaID, r.step, r.key, r.reason, r.err.Error()); err != nil {
		return fmt.Errorf("record rejected %s %s: %w", r.eventType, r.eventID, err)
	}
	s.Metrics.rejected(r.reason)
	s.log().Warn("saga input rejected", "event_id", r.eventID, "event_type", r.eventType, "saga_id", r.sagaID, "step", r.step,
		"reason", r.reason, "err", r.err)
	return nil
}

// row is what a saga's row holds beyond orchestrator.Saga.
type row struct {
	orderID string
	input   []byte
}

// load reads saga id and its steps, locking the saga's row until tx ends.
func (s *Store) load(ctx context.Context, tx pgx.Tx, id string) (orchestrator.Saga, row, bool, error) {
	var sg orchestrator.Saga
	var rw row
	var ctxJSON []byte
	var errText, failed *string
	var deadline, completed *time.Time
	var cmdID *string
	err := tx.QueryRow(ctx, `select saga_name, order_id, status, input, context, error, failed_step, deadline, awaiting_reply, command_id,
			started_at, completed_at
		from saga_executions where saga_id = $1 for update`, id).Scan(&sg.Name, &rw.orderID, &sg.Status, &rw.input, &ctxJSON, &errText, &failed,
		&deadline, &sg.AwaitingReply, &cmdID, &sg.StartedAt, &completed)
	if errors.Is(err, pgx.ErrNoRows) {
		return sg, rw, false, nil
	}
	if err != nil {
		return sg, rw, false, fmt.Errorf("saga %s: load: %w", id, err)
	}
	sg.ID = id
	if err := json.Unmarshal(ctxJSON, &sg.Context); err != nil {
		return sg, rw, false, fmt.Errorf("saga %s: context: %w", id, err)
	}
	sg.Error, sg.FailedStep, sg.CommandID = deref(errText), deref(failed), deref(cmdID)
	if deadline != nil {
		sg.Deadline = *deadline
	}
	if completed != nil {
		sg.CompletedAt = *completed
	}
	rows, err := tx.Query(ctx, `select step_order, step_name, step_status, coalesce(step_error, ''), attempts, compensation_attempts, uncertain,
		coalesce(executed_at, 'epoch'), coalesce(compensated_at, 'epoch'), coalesce(command_id, ''), coalesce(compensation_command_id, '')
		from saga_steps where execution_id = $1 order by step_order`, id)
	if err != nil {
		return sg, rw, false, fmt.Errorf("saga %s: steps: %w", id, err)
	}
	var st orchestrator.Step
	_, err = pgx.ForEachRow(rows, []any{&st.Order, &st.Name, &st.Status, &st.Error, &st.Attempts, &st.CompensationAttempts, &st.Uncertain,
		&st.ExecutedAt, &st.CompensatedAt, &st.FirstCommandID, &st.FirstCompensationID}, func() error {
		if st.ExecutedAt.Equal(time.Unix(0, 0)) {
			st.ExecutedAt = time.Time{}
		}
		if st.CompensatedAt.Equal(time.Unix(0, 0)) {
			st.CompensatedAt = time.Time{}
		}
		sg.Steps = append(sg.Steps, st)
		return nil
	})
	if err != nil {
		return sg, rw, false, fmt.Errorf("saga %s: steps: %w", id, err)
	}
	for i, st := range sg.Steps {
		if st.Order != i {
			return sg, rw, false, fmt.Errorf("saga %s: step rows are not 0..%d", id, len(sg.Steps)-1)
		}
	}
	return sg, rw, true, nil
}

// save stores what d decided and emits its commands, the saga's outcome
// when it ended, and a review entry when it FAILED, all in tx.
func (s *Store) save(ctx context.Context, tx pgx.Tx, out outbox.Emitter, d orchestrator.Decision, rw row, causationID string) error {
	sg := d.Saga
	sg.Steps = slices.Clone(sg.Steps)
	for _, c := range d.Commands {
		p, err := orchestrator.Build(s.Def, sg, rw.input, c)
		if err != nil {
			return idempotent.Permanent(fmt.Errorf("saga %s: %w", sg.ID, err))
		}
		env, err := out.Emit(outbox.Event{Payload: p, AggregateID: sg.ID, CorrelationID: rw.orderID, CausationID: causationID})
		if err != nil {
			return fmt.Errorf("saga %s: %s %s: %w", sg.ID, c.Kind, c.Step, err)
		}
		sg.CommandID = env.EventID
		if c.Attempt == 1 && c.Order < len(sg.Steps) {
			if c.Kind == orchestrator.Execute {
				sg.Steps[c.Order].FirstCommandID = env.EventID
			} else {
				sg.Steps[c.Order].FirstCompensationID = env.EventID
			}
		}
		s.Metrics.command(c)
	}
	ctxJSON, err := json.Marshal(sg.Context)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	b.Queue(`update saga_executions set status = $2, context = $3, error = nullif($4, ''), failed_step = nullif($5, ''),
		deadline = $6, awaiting_reply = $7, completed_at = $8, command_id = nullif($9, ''), updated_at = now() where saga_id = $1`,
		sg.ID, sg.Status, ctxJSON, sg.Error, sg.FailedStep, nullTime(sg.Deadline), sg.AwaitingReply, nullTime(sg.CompletedAt), sg.CommandID)
	for _, st := range sg.Steps {
		b.Queue(`insert into saga_steps (execution_id, step_order, step_name, step_status, step_error, idempotency_key, compensation_key,
				attempts, compensation_attempts, uncertain, executed_at, compensated_at, command_id, compensation_command_id)
			values ($1, $2, $3, $4, nullif($5, ''), $6, $7, $8, $9, $10, $11, $12, nullif($13, ''), nullif($14, ''))
			on conflict (execution_id, step_order) do update set step_status = excluded.step_status, step_error = excluded.step_error,
				attempts = excluded.attempts, compensation_attempts = excluded.compensation_attempts, uncertain = excluded.uncertain,
				executed_at = excluded.executed_at, compensated_at = excluded.compensated_at,
				command_id = excluded.command_id, compensation_command_id = excluded.compensation_command_id, updated_at = now()
			where (saga_steps.step_status, coalesce(saga_steps.step_error, ''), saga_steps.attempts, saga_steps.compensation_attempts)
				is distinct from (excluded.step_status, coalesce(excluded.step_error, ''), excluded.attempts, excluded.compensation_attempts)`,
			sg.ID, st.Order, st.Name, st.Status, st.Error, orchestrator.ExecuteKey(sg.ID, st.Name), orchestrator.CompensateKey(sg.ID, st.Name),
			st.Attempts, st.CompensationAttempts, st.Uncertain, nullTime(st.ExecutedAt), nullTime(st.CompensatedAt),
			st.FirstCommandID, st.FirstCompensationID)
	}
	var failedSteps []string
	if d.Finished && sg.Status == orchestrator.StatusFailed {
		for _, st := range sg.Steps {
			if st.Status == orchestrator.StepCompensationFailed {
				failedSteps = append(failedSteps, st.Name)
			}
		}
		b.Queue(`insert into saga_reviews (saga_id, order_id, failed_steps, reason) values ($1, $2, $3, $4) on conflict (saga_id) do nothing`,
			sg.ID, rw.orderID, failedSteps, sg.Error)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("saga %s: save: %w", sg.ID, err)
	}
	if d.TimedOut != "" {
		s.Metrics.timedOut(d.TimedOut)
		s.log().Warn("saga step timed out", "saga_id", sg.ID, "step", d.TimedOut)
	}
	for _, step := range d.Exhausted {
		s.log().Error("saga compensation exhausted", "saga_id", sg.ID, "step", step)
	}
	if d.Finished {
		fin := contract.SagaFinishedV1{SagaID: sg.ID, SagaName: sg.Name, OrderID: rw.orderID, Status: contract.SagaFinishedV1Status(sg.Status),
			FailedStep: sg.FailedStep, Reason: sg.Error}
		if sg.Status == orchestrator.StatusCompleted {
			fin.ProviderPaymentID, fin.ShipmentID = sg.Context[orchestrator.CtxProviderPaymentID], sg.Context[orchestrator.CtxShipmentID]
		}
		if _, err := out.Emit(outbox.Event{Payload: fin, AggregateID: sg.ID, CorrelationID: rw.orderID, CausationID: causationID}); err != nil {
			return fmt.Errorf("saga %s: finished: %w", sg.ID, err)
		}
		s.Metrics.finished(sg.Name, sg.Status)
		s.log().Info("saga finished", "saga_id", sg.ID, "status", sg.Status, "failed_step", sg.FailedStep, "error", sg.Error)
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
