package orchestrator

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/concordhq/concord/schemas/contract"
)

// Saga is one execution as stored: its status, a Step per step started so
// far (Steps[i] is the definition's step i), and when the sweeper must
// look at it next.
type Saga struct {
	ID, Name string
	Status   Status
	Steps    []Step
	// Error says why the saga did not complete; FailedStep names the
	// step whose failure started the compensation.
	Error, FailedStep string
	// Deadline is when the saga needs the sweeper: a reply timeout when
	// AwaitingReply, else the end of a retry's backoff. Zero when
	// terminal.
	Deadline      time.Time
	AwaitingReply bool
	// CommandID is the event id of the latest command sent. A failure
	// reply counts only while a send is awaited and when it answers that
	// send or the key's first (participants that keep their outcome answer
	// a repeat with the first command's id); a failure repeated during a
	// retry's backoff, or answering an intermediate send, is a duplicate,
	// so it cannot use up the step's attempts. A success counts whichever
	// send it answers.
	CommandID string
	// Context holds what replies taught the saga (the hold's payment
	// intent, the shipment id): later commands carry it.
	Context                map[string]string
	StartedAt, CompletedAt time.Time
}

// Step is a started step.
type Step struct {
	Order  int
	Name   string
	Status StepStatus
	Error  string
	// Attempts and CompensationAttempts count the sends of each command.
	Attempts, CompensationAttempts int
	// Uncertain marks a step that failed without an answer (every
	// attempt timed out): the participant may still have applied it, so
	// it is compensated like an executed step. Compensations succeed
	// when there is nothing to undo, and a participant that sees the
	// compensation first refuses the late command.
	Uncertain                 bool
	ExecutedAt, CompensatedAt time.Time
	// FirstCommandID and FirstCompensationID are the event ids of the
	// first send of the step's execute and compensate commands.
	FirstCommandID, FirstCompensationID string
}

// Reply is a participant's answer as the state machine reads it.
type Reply struct {
	Step        string
	CommandType contract.Type
	Key         string
	Succeeded   bool
	Reason      string
	Retryable   bool
	// CommandID is the event id of the command answered.
	CommandID string
	// Details are remembered in the saga's Context (non-empty values).
	Details map[string]string
}

// Reasons an input changed nothing; the store counts them
// (concord_saga_replies_absorbed_total{reason}).
const (
	AbsorbedTerminal   = "terminal"     // the saga already ended
	AbsorbedDuplicate  = "duplicate"    // the step already moved past what the reply says
	AbsorbedLate       = "late"         // a success for a step given up after its timeouts; its compensation covers it
	AbsorbedOutOfOrder = "out_of_order" // a reply for a step or command not sent yet
	AbsorbedNotDue     = "not_due"      // a deadline looked at before it passed (another instance moved the saga)
)

// Errors of replies that are not merely late or repeated but wrong: the
// consumer dead-letters them with the reason.
var (
	ErrUnknownStep     = errors.New("reply names a step the saga definition does not have")
	ErrCommandMismatch = errors.New("reply's command type or idempotency key is not the step's")
)

// Decision is what one input does to a saga.
type Decision struct {
	Saga Saga
	// Commands to send, in order, in the transaction that stores Saga.
	Commands []Command
	// Changed is false when the input was absorbed (see Absorbed).
	Changed  bool
	Absorbed string
	// Finished is set when this decision made the saga terminal.
	Finished bool
	// TimedOut names the step whose reply did not come in time.
	TimedOut string
	// Exhausted names the steps whose compensation was given up in this
	// decision (each needs a review entry and an alert).
	Exhausted []string
}

func (s Saga) clone() Saga {
	c := s
	c.Steps = slices.Clone(s.Steps)
	c.Context = maps.Clone(s.Context)
	if c.Context == nil {
		c.Context = map[string]string{}
	}
	return c
}

// Start begins a saga of def with the given id: RUNNING, its first
// step's command out.
func Start(def *Definition, id string, now time.Time) Decision {
	d := Decision{Saga: Saga{ID: id, Name: def.Name, Status: StatusRunning, StartedAt: now, Context: map[string]string{}}, Changed: true}
	d.startStep(def, 0, now)
	return d
}

// OnReply applies a participant's reply. A reply that names no step of
// def, or whose command type or key is not the step's, is an error (bad
// input: dead-lettered); one that is repeated, late or early changes
// nothing and says why in Absorbed.
func OnReply(def *Definition, s Saga, r Reply, now time.Time) (Decision, error) {
	sd, i, ok := def.Step(r.Step)
	if !ok {
		return Decision{Saga: s}, fmt.Errorf("%w: saga %s (%s) has no step %q", ErrUnknownStep, s.ID, def.Name, r.Step)
	}
	var kind Kind
	switch {
	case r.CommandType == sd.ExecuteType && r.Key == ExecuteKey(s.ID, sd.Name):
		kind = Execute
	case sd.CompensateType != "" && r.CommandType == sd.CompensateType && r.Key == CompensateKey(s.ID, sd.Name):
		kind = Compensate
	default:
		return Decision{Saga: s}, fmt.Errorf("%w: saga %s step %s: reply to %s under key %q", ErrCommandMismatch, s.ID, sd.Name, r.CommandType, r.Key)
	}
	d := Decision{Saga: s.clone()}
	if s.Status.Terminal() {
		d.Absorbed = AbsorbedTerminal
		return d, nil
	}
	if i >= len(s.Steps) {
		d.Absorbed = AbsorbedOutOfOrder
		return d, nil
	}
	st := &d.Saga.Steps[i]
	first := st.FirstCommandID
	if kind == Compensate {
		first = st.FirstCompensationID
	}
	current := r.Succeeded || (s.AwaitingReply && (r.CommandID == s.CommandID || r.CommandID == first))
	switch {
	case !current && ((kind == Execute && st.Status == StepRunning) || (kind == Compensate && st.Status == StepCompensating)):
		d.Absorbed = AbsorbedDuplicate // a failure already counted, or of an earlier send
	case kind == Execute && st.Status == StepRunning:
		d.Changed = true
		switch {
		case r.Succeeded:
			st.Status, st.Error, st.ExecutedAt = StepExecuted, "", now
			for k, v := range r.Details {
				if v != "" {
					d.Saga.Context[k] = v
				}
			}
			if i+1 < len(def.Steps) {
				d.startStep(def, i+1, now)
			} else {
				d.finish(StatusCompleted, now)
			}
		case r.Retryable && st.Attempts < sd.Policy.Attempts:
			st.Error = r.Reason
			d.wait(now.Add(sd.Policy.backoff(st.Attempts)))
		default:
			d.fail(def, i, reasonOr(r.Reason, "failed"), false, now)
		}
	case kind == Compensate && st.Status == StepCompensating:
		d.Changed = true
		switch {
		case r.Succeeded:
			st.Status, st.CompensatedAt = StepCompensated, now
			d.nextCompensation(def, now)
		case st.CompensationAttempts < sd.Policy.CompensationAttempts:
			st.Error = "compensation: " + reasonOr(r.Reason, "failed")
			d.wait(now.Add(sd.Policy.backoff(st.CompensationAttempts)))
		default:
			d.giveUpCompensation(def, i, reasonOr(r.Reason, "failed"), now)
		}
	case kind == Execute && r.Succeeded && st.Status == StepFailed && st.Uncertain:
		d.Absorbed = AbsorbedLate
	case kind == Compensate && (st.Status == StepRunning || st.Status == StepExecuted || st.Status == StepFailed):
		d.Absorbed = AbsorbedOutOfOrder
	default:
		d.Absorbed = AbsorbedDuplicate
	}
	return d, nil
}

// OnDeadline acts on a saga whose deadline passed: the active command is
// sent again (after a retry's backoff, or because its reply did not come
// in time) or, out of attempts, its step fails (execute: compensation
// starts) or its compensation is given up.
func OnDeadline(def *Definition, s Saga, now time.Time) Decision {
	d := Decision{Saga: s.clone()}
	if s.Status.Terminal() {
		d.Absorbed = AbsorbedTerminal
		return d
	}
	if s.Deadline.IsZero() || now.Before(s.Deadline) {
		d.Absorbed = AbsorbedNotDue
		return d
	}
	i := d.Saga.active()
	if i < 0 {
		// No command is out: cannot happen from Start/OnReply; end the
		// saga's wait rather than loop on it.
		d.Absorbed = AbsorbedNotDue
		return d
	}
	sd, st := def.Steps[i], &d.Saga.Steps[i]
	d.Changed = true
	if d.Saga.AwaitingReply {
		d.TimedOut = st.Name
	}
	switch st.Status {
	case StepRunning:
		if st.Attempts < sd.Policy.Attempts {
			st.Attempts++
			if d.Saga.AwaitingReply {
				st.Error = "no reply"
			}
			d.send(Command{Step: st.Name, Order: i, Kind: Execute, Key: ExecuteKey(s.ID, st.Name), Attempt: st.Attempts}, now.Add(sd.Policy.Timeout))
			return d
		}
		reason := st.Error
		if d.Saga.AwaitingReply {
			reason = fmt.Sprintf("no reply within %d attempts of %s", st.Attempts, sd.Policy.Timeout)
		}
		d.fail(def, i, reason, d.Saga.AwaitingReply, now)
	case StepCompensating:
		if st.CompensationAttempts < sd.Policy.CompensationAttempts {
			st.CompensationAttempts++
			d.send(Command{Step: st.Name, Order: i, Kind: Compensate, Key: CompensateKey(s.ID, st.Name), Attempt: st.CompensationAttempts},
				now.Add(sd.Policy.Timeout))
			return d
		}
		reason := st.Error
		if d.Saga.AwaitingReply {
			reason = "no reply"
		}
		d.giveUpCompensation(def, i, reason, now)
	}
	return d
}

// active is the index of the step whose command is out or waits to be
// sent again, or -1.
func (s Saga) active() int {
	for i := len(s.Steps) - 1; i >= 0; i-- {
		if st := s.Steps[i].Status; st == StepRunning || st == StepCompensating {
			return i
		}
	}
	return -1
}

func (d *Decision) startStep(def *Definition, i int, now time.Time) {
	sd := def.Steps[i]
	d.Saga.Steps = append(d.Saga.Steps, Step{Order: i, Name: sd.Name, Status: StepRunning, Attempts: 1})
	d.send(Command{Step: sd.Name, Order: i, Kind: Execute, Key: ExecuteKey(d.Saga.ID, sd.Name), Attempt: 1}, now.Add(sd.Policy.Timeout))
}

func (d *Decision) send(c Command, deadline time.Time) {
	d.Commands = append(d.Commands, c)
	d.Saga.Deadline, d.Saga.AwaitingReply = deadline, true
}

func (d *Decision) wait(until time.Time) {
	d.Saga.Deadline, d.Saga.AwaitingReply = until, false
}

// fail marks step i failed and starts compensating what ran before it
// (and step i itself when uncertain).
func (d *Decision) fail(def *Definition, i int, reason string, uncertain bool, now time.Time) {
	st := &d.Saga.Steps[i]
	st.Status, st.Error, st.Uncertain = StepFailed, reason, uncertain
	d.Saga.Status, d.Saga.FailedStep = StatusCompensating, st.Name
	d.Saga.Error = st.Name + " failed: " + reason
	d.nextCompensation(def, now)
}

func (d *Decision) giveUpCompensation(def *Definition, i int, reason string, now time.Time) {
	st := &d.Saga.Steps[i]
	st.Status = StepCompensationFailed
	st.Error = fmt.Sprintf("compensation failed after %d attempts: %s", st.CompensationAttempts, reason)
	d.Exhausted = append(d.Exhausted, st.Name)
	d.nextCompensation(def, now)
}

// nextCompensation sends the compensation of the latest step that may
// have taken effect and is not undone yet, or ends the saga when none is
// left: COMPENSATED, or FAILED when a compensation was given up.
func (d *Decision) nextCompensation(def *Definition, now time.Time) {
	for i := len(d.Saga.Steps) - 1; i >= 0; i-- {
		st := &d.Saga.Steps[i]
		sd := def.Steps[st.Order]
		if sd.Compensate == nil || !(st.Status == StepExecuted || (st.Status == StepFailed && st.Uncertain)) {
			continue
		}
		st.Status, st.CompensationAttempts = StepCompensating, 1
		d.send(Command{Step: st.Name, Order: i, Kind: Compensate, Key: CompensateKey(d.Saga.ID, st.Name), Attempt: 1}, now.Add(sd.Policy.Timeout))
		return
	}
	var failed []string
	for _, st := range d.Saga.Steps {
		if st.Status == StepCompensationFailed {
			failed = append(failed, st.Name)
		}
	}
	if len(failed) > 0 {
		d.Saga.Error = fmt.Sprintf("%s; compensation failed: %v", d.Saga.Error, failed)
		d.finish(StatusFailed, now)
		return
	}
	d.finish(StatusCompensated, now)
}

func (d *Decision) finish(s Status, now time.Time) {
	d.Saga.Status, d.Saga.CompletedAt = s, now
	d.Saga.Deadline, d.Saga.AwaitingReply = time.Time{}, false
	d.Finished = true
}

func reasonOr(reason, def string) string {
	if reason == "" {
		return def
	}
	return reason
}
