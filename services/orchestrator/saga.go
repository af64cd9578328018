// Package orchestrator is the orchestrated saga's domain: saga definitions
// as code (steps with an execute and a compensate command, a per-step
// timeout and retry policy) and the state machine that decides, from a
// saga's state and one input (a reply, a deadline), what the saga becomes
// and which command goes out next. It does no I/O: orchestratorstore keeps
// the state in saga_executions and saga_steps and sends the commands
// through the outbox in the transaction that records the decision.
//
//	PENDING ─start─▶ RUNNING ─last step executed─▶ COMPLETED
//	                   │
//	                   └─a step failed─▶ COMPENSATING ─every compensation succeeded─▶ COMPENSATED
//	                                        │
//	                                        └─a compensation exhausted its attempts─▶ FAILED (review entry, alert)
//
// Saga statuses are upper case and step statuses lower case, as seed 001's
// dashboard queries read them (e.status = 'FAILED', step_status = 'executed').
package orchestrator

import (
	"fmt"
	"time"

	"github.com/concordhq/concord/infra/backoff"
	"github.com/concordhq/concord/schemas/contract"
)

// Status is a saga's state.
type Status string

// Saga statuses. COMPLETED, COMPENSATED and FAILED are terminal.
const (
	StatusPending      Status = "PENDING"
	StatusRunning      Status = "RUNNING"
	StatusCompensating Status = "COMPENSATING"
	StatusCompleted    Status = "COMPLETED"
	StatusCompensated  Status = "COMPENSATED"
	StatusFailed       Status = "FAILED"
)

// Terminal reports whether no input moves the saga any more.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusCompensated || s == StatusFailed
}

// StepStatus is a step's state. A step has a row from the moment its
// command is first sent.
type StepStatus string

// Step statuses.
const (
	StepRunning            StepStatus = "running"      // the execute command is out (or waits to be sent again)
	StepExecuted           StepStatus = "executed"     // the participant applied it
	StepFailed             StepStatus = "failed"       // refused, or gave no answer within its attempts
	StepCompensating       StepStatus = "compensating" // the compensate command is out (or waits to be sent again)
	StepCompensated        StepStatus = "compensated"
	StepCompensationFailed StepStatus = "compensation_failed"
)

// Kind says whether a command executes a step or compensates it.
type Kind string

// Command kinds.
const (
	Execute    Kind = "execute"
	Compensate Kind = "compensate"
)

// Policy is how a step's commands are retried.
type Policy struct {
	// Timeout is how long a sent command waits for its reply before it
	// counts as a failed attempt.
	Timeout time.Duration
	// Attempts is how many times the execute command is sent (at least
	// 1) before the step fails: a reply that never comes, or a failure
	// the participant calls retryable, uses one.
	Attempts int
	// CompensationAttempts is how many times the compensate command is
	// sent before the step is COMPENSATION_FAILED. Every failure of a
	// compensation is retried: undoing must not give up on a hiccup.
	CompensationAttempts int
	// BackoffMin and BackoffMax bound the wait before a command that
	// failed is sent again (exponential, see infra/backoff).
	BackoffMin, BackoffMax time.Duration
}

// backoff is the wait after the n-th failed attempt.
func (p Policy) backoff(n int) time.Duration {
	return backoff.Exponential(n, p.BackoffMin, p.BackoffMax)
}

// Command is what Decide asks to send: the step's execute or compensate
// command, under the step's key for that kind, for the given attempt.
type Command struct {
	Step    string
	Order   int
	Kind    Kind
	Key     string
	Attempt int
}

// Builder turns a command into the payload that travels: the saga's input
// and what earlier replies taught it (Context) fill the business fields.
type Builder func(in Input, c Command) (contract.Payload, error)

// Input is what a command builder reads: the saga's id, its input (the
// request that started it, as stored) and the details replies added.
type Input struct {
	SagaID  string
	Data    []byte
	Context map[string]string
}

// StepDef is one step of a saga definition.
type StepDef struct {
	Name        string
	ExecuteType contract.Type
	Execute     Builder
	// CompensateType and Compensate are empty for a step nothing undoes
	// (the last step of the checkout: capture is undone by refunding
	// through the hold's compensation).
	CompensateType contract.Type
	Compensate     Builder
	Policy         Policy
}

// Definition is a saga as code: its steps, run in order, compensated in
// reverse.
type Definition struct {
	Name  string
	Steps []StepDef
}

// Step returns the step named name and its index.
func (d *Definition) Step(name string) (StepDef, int, bool) {
	for i, s := range d.Steps {
		if s.Name == name {
			return s, i, true
		}
	}
	return StepDef{}, -1, false
}

// Validate reports a definition that cannot run.
func (d *Definition) Validate() error {
	if d.Name == "" || len(d.Steps) == 0 {
		return fmt.Errorf("saga definition: needs a name and at least one step")
	}
	seen := map[string]bool{}
	for i, s := range d.Steps {
		switch {
		case s.Name == "" || seen[s.Name]:
			return fmt.Errorf("saga %s step %d: names must be set and unique", d.Name, i)
		case s.Execute == nil || s.ExecuteType == "":
			return fmt.Errorf("saga %s step %s: needs an execute command", d.Name, s.Name)
		case (s.Compensate == nil) != (s.CompensateType == ""):
			return fmt.Errorf("saga %s step %s: compensate command and type go together", d.Name, s.Name)
		case s.Policy.Timeout <= 0 || s.Policy.Attempts < 1 || s.Policy.CompensationAttempts < 1:
			return fmt.Errorf("saga %s step %s: policy needs a timeout and at least one attempt of each kind", d.Name, s.Name)
		case s.Policy.BackoffMin <= 0 || s.Policy.BackoffMax < s.Policy.BackoffMin:
			return fmt.Errorf("saga %s step %s: policy needs 0 < backoff min <= backoff max", d.Name, s.Name)
		}
		seen[s.Name] = true
	}
	return nil
}

// ExecuteKey is the idempotency key of a step's execute command: derived
// from the saga and the step only, so every attempt, every restart and
// every instance sends the same key.
func ExecuteKey(sagaID, step string) string { return sagaID + ":" + step }

// CompensateKey is the key of the step's compensation: the execute key
// with "_compensate", as in seed 001.
func CompensateKey(sagaID, step string) string { return ExecuteKey(sagaID, step) + "_compensate" }
