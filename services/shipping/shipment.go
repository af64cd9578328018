package shipping

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/concordhq/concord/schemas/contract"
)

// Command types a reply names: the contract's, as strings for the
// reply's command_type.
const (
	CommandCreate = string(contract.TypeShippingCreateShipment)
	CommandCancel = string(contract.TypeShippingCancelShipment)
)

// Answer is what a command was told.
type Answer struct {
	Outcome   Outcome
	Reason    string
	Retryable bool
}

// Phase is one command's side of a shipment: the create, or its
// cancellation.
type Phase struct {
	// CommandID is the event id of the latest command received under the
	// key ("" until one arrived): a reply names the command it answers,
	// and the orchestrator counts a failure only when it answers the
	// command it sent last.
	CommandID string
	Key       string
	Step      string
	// Deadline ends the phase's budget of carrier attempts.
	Deadline time.Time
	// Answer is nil until the command was replied to.
	Answer *Answer
}

// Shipment is one create key's shipment: what the carrier was asked, what
// it said, and what each command was told. Its methods are the transitions;
// each returns the replies the transition owes, which the caller appends
// to the outbox in the transaction that stores the new state.
type Shipment struct {
	Key     string // the create command's idempotency key
	SagaID  string
	OrderID string
	// Parcel is what the create command asked for (zero until it arrived).
	Parcel         Parcel
	Status         Status
	CarrierID      string
	TrackingNumber string
	// CreateCalls counts create calls, each counted before it is sent.
	CreateCalls  int
	Create       Phase
	Cancel       Phase
	CancelStatus CancelStatus
	// InternalCancel: the cancellation is our own voiding after a
	// give-up, with no command to answer.
	InternalCancel bool
}

// CreateCommand is a shipping.create_shipment as the domain needs it.
type CreateCommand struct {
	CommandID, Key, SagaID, Step string
	Parcel                       Parcel
}

// CancelCommand is a shipping.cancel_shipment as the domain needs it.
type CancelCommand struct {
	CommandID, Key, SagaID, Step, OrderID string
	// ShipmentKey is the create command's key.
	ShipmentKey string
}

// Reply is the saga.step_replied a command gets.
type Reply struct {
	SagaID, Step, CommandType, CommandID, IdempotencyKey string
	Answer
	// ShipmentID and TrackingNumber are the carrier's, when it created one.
	ShipmentID, TrackingNumber string
}

// State is what Next decides from.
func (s *Shipment) State() State {
	return State{Status: s.Status, CancelStatus: s.CancelStatus, CreateCalls: s.CreateCalls,
		CreateDeadline: s.Create.Deadline, CancelDeadline: s.Cancel.Deadline, InternalCancel: s.InternalCancel}
}

// NewShipment is the row a create command makes when its key is new.
func NewShipment(c CreateCommand, now time.Time, budget time.Duration) Shipment {
	return Shipment{Key: c.Key, SagaID: c.SagaID, OrderID: c.Parcel.OrderID, Parcel: c.Parcel, Status: StatusPending,
		Create: Phase{CommandID: c.CommandID, Key: c.Key, Step: c.Step, Deadline: now.Add(budget)}}
}

// NewCancelledFirst is the row a cancellation makes when it arrives before
// its create: nothing was shipped, the cancellation succeeds, and a create
// arriving later is refused.
func NewCancelledFirst(c CancelCommand) (Shipment, []Reply) {
	s := Shipment{Key: c.ShipmentKey, SagaID: c.SagaID, OrderID: c.OrderID, Status: StatusCancelled, CancelStatus: CancelDone,
		Cancel: Phase{CommandID: c.CommandID, Key: c.Key, Step: c.Step}}
	return s, s.answerCancel(Answer{Outcome: Succeeded})
}

// OnCreate applies a create command to an existing row: a repeat of the
// command gets the reply already sent; a command after a transient
// failure (retryable) starts a new budget; the create of a row a
// cancellation made first is refused.
func (s *Shipment) OnCreate(c CreateCommand, now time.Time, budget time.Duration) []Reply {
	if s.Create.CommandID == "" { // the cancellation came first
		s.Create = Phase{CommandID: c.CommandID, Key: c.Key, Step: c.Step}
		s.Parcel = c.Parcel
		return s.answerCreate(Answer{Outcome: Failed, Reason: ReasonCancelledFirst})
	}
	s.Create.CommandID = c.CommandID // the answer names the command it answers
	a := s.Create.Answer
	switch {
	case a == nil:
		return nil // the worker answers when the carrier has
	case !a.Retryable:
		return []Reply{s.reply(CommandCreate)}
	}
	// Retryable: the carrier did not answer in time. Start over, unless
	// our voiding already found and cancelled a shipment under the key.
	if s.Status == StatusCancelled && s.CarrierID != "" {
		s.Create.Answer = &Answer{Outcome: Failed, Reason: ReasonVoided}
		return []Reply{s.reply(CommandCreate)}
	}
	if s.InternalCancel {
		s.InternalCancel, s.CancelStatus = false, CancelNone
		if s.Status == StatusCancelled {
			s.Status = StatusPending
		}
	}
	s.Create.Answer, s.Create.Deadline = nil, now.Add(budget)
	return nil
}

// ReasonVoided: a create retried after a give-up whose shipment was found
// and voided in between.
const ReasonVoided = "shipment_voided"

// OnCancel applies a cancellation to an existing row.
func (s *Shipment) OnCancel(c CancelCommand, now time.Time, budget time.Duration) []Reply {
	if s.Cancel.CommandID != "" && !s.InternalCancel {
		s.Cancel.CommandID = c.CommandID
		a := s.Cancel.Answer
		switch {
		case a == nil:
			return nil
		case !a.Retryable:
			return []Reply{s.reply(CommandCancel)}
		}
		s.Cancel.Answer, s.Cancel.Deadline, s.CancelStatus = nil, now.Add(budget), CancelPending
		return nil
	}
	internalDone := s.InternalCancel && s.CancelStatus == CancelDone
	s.Cancel = Phase{CommandID: c.CommandID, Key: c.Key, Step: c.Step, Deadline: now.Add(budget)}
	s.InternalCancel = false
	switch {
	case internalDone, s.Status == StatusDeclined, s.Status == StatusCancelled:
		s.CancelStatus = CancelDone
		return s.answerCancel(Answer{Outcome: Succeeded})
	case s.Status == StatusPending && s.CreateCalls == 0:
		return s.NeverCreated()
	}
	s.CancelStatus = CancelPending
	return nil
}

// Created records the carrier's shipment.
func (s *Shipment) Created(carrierID, tracking string) []Reply {
	if s.Status != StatusPending {
		return nil
	}
	s.Status, s.CarrierID, s.TrackingNumber = StatusCreated, carrierID, tracking
	return s.answerCreate(Answer{Outcome: Succeeded})
}

// Declined records the carrier's refusal to ship; a pending cancellation
// has nothing to cancel.
func (s *Shipment) Declined(code string) []Reply {
	if s.Status != StatusPending {
		return nil
	}
	s.Status = StatusDeclined
	out := s.answerCreate(Answer{Outcome: Failed, Reason: code})
	if s.CancelStatus == CancelPending {
		s.CancelStatus = CancelDone
		out = append(out, s.answerCancel(Answer{Outcome: Succeeded})...)
	}
	return out
}

// NeverCreated settles a cancellation of a shipment the carrier does not
// have (never called, or the key looked up and not found): nothing will
// be created under the key any more.
func (s *Shipment) NeverCreated() []Reply {
	var out []Reply
	if s.Status == StatusPending {
		s.Status = StatusCancelled
		out = s.answerCreate(Answer{Outcome: Failed, Reason: ReasonCancelledFirst})
	}
	s.CancelStatus = CancelDone
	return append(out, s.answerCancel(Answer{Outcome: Succeeded})...)
}

// NotFoundForCancel records a lookup, made for a pending cancellation,
// that found nothing under the key: NeverCreated. The lookup ran outside
// the row's lock, so the row may have moved on meanwhile — a resent create
// after a give-up ends our own voiding and starts the create over — and
// then the answer is stale: it changes nothing and the row is decided
// again (it would otherwise refuse the resent create as
// cancelled_before_created).
func (s *Shipment) NotFoundForCancel() []Reply {
	if s.CancelStatus != CancelPending {
		return nil
	}
	return s.NeverCreated()
}

// Voided records the carrier's cancellation of the shipment.
func (s *Shipment) Voided() []Reply {
	s.Status, s.CancelStatus = StatusCancelled, CancelDone
	return s.answerCancel(Answer{Outcome: Succeeded})
}

// CancelRefused records a cancellation the carrier refused for good.
func (s *Shipment) CancelRefused(reason string) []Reply {
	s.CancelStatus = CancelFailed
	return s.answerCancel(Answer{Outcome: Failed, Reason: reason})
}

// GiveUpCreate answers the create failed (retryable: the carrier did not
// answer in time) and turns to voiding: a call whose answer was lost may
// have created a shipment, which must not outlive a failed step.
func (s *Shipment) GiveUpCreate() []Reply {
	out := s.answerCreate(Answer{Outcome: Failed, Reason: ReasonCarrierUnavailable, Retryable: true})
	if s.CancelStatus != CancelPending {
		s.CancelStatus, s.InternalCancel = CancelPending, true
	}
	return out
}

// GiveUpCancel answers the cancellation failed (retryable).
func (s *Shipment) GiveUpCancel() []Reply {
	s.CancelStatus = CancelFailed
	return s.answerCancel(Answer{Outcome: Failed, Reason: ReasonCarrierUnavailable, Retryable: true})
}

// answerCreate records a's answer to the create and returns its reply,
// unless the create was answered already or never arrived.
func (s *Shipment) answerCreate(a Answer) []Reply {
	if s.Create.CommandID == "" || s.Create.Answer != nil {
		return nil
	}
	s.Create.Answer = &a
	return []Reply{s.reply(CommandCreate)}
}

func (s *Shipment) answerCancel(a Answer) []Reply {
	if s.Cancel.CommandID == "" || s.InternalCancel || s.Cancel.Answer != nil {
		return nil
	}
	s.Cancel.Answer = &a
	return []Reply{s.reply(CommandCancel)}
}

func (s *Shipment) reply(commandType string) Reply {
	p := s.Create
	if commandType == CommandCancel {
		p = s.Cancel
	}
	r := Reply{SagaID: s.SagaID, Step: p.Step, CommandType: commandType, CommandID: p.CommandID, IdempotencyKey: p.Key,
		Answer: *p.Answer, ShipmentID: s.CarrierID}
	if commandType == CommandCreate && p.Answer.Outcome == Succeeded {
		r.TrackingNumber = s.TrackingNumber
	}
	return r
}

// ErrContradiction is a command that contradicts what the shipment's
// earlier commands said under the same key: another saga, order or
// parcel. Retrying cannot fix it; it is a bug in key derivation or a
// forged command, and nothing is changed for it.
var ErrContradiction = errors.New("command contradicts the shipment's earlier commands")

// Equal reports whether p and q ask for the same shipment.
func (p Parcel) Equal(q Parcel) bool {
	return p.OrderID == q.OrderID && p.Address == q.Address && slices.Equal(p.Items, q.Items)
}

// CheckCreate returns an error wrapping ErrContradiction when c cannot be
// a repeat of the create this shipment was made for.
func (s *Shipment) CheckCreate(c CreateCommand) error {
	switch {
	case s.SagaID != c.SagaID || s.OrderID != c.Parcel.OrderID:
		return fmt.Errorf("%w: create %s for saga %s order %s, the key's shipment is saga %s order %s",
			ErrContradiction, c.Key, c.SagaID, c.Parcel.OrderID, s.SagaID, s.OrderID)
	case s.Create.CommandID != "" && (s.Create.Step != c.Step || !s.Parcel.Equal(c.Parcel)):
		return fmt.Errorf("%w: create %s asks for another step or parcel than its first send", ErrContradiction, c.Key)
	}
	return nil
}

// CheckCancel returns an error wrapping ErrContradiction when c cannot be
// a cancellation of this shipment.
func (s *Shipment) CheckCancel(c CancelCommand) error {
	switch {
	case s.SagaID != c.SagaID || s.OrderID != c.OrderID:
		return fmt.Errorf("%w: cancel %s for saga %s order %s, the shipment is saga %s order %s",
			ErrContradiction, c.Key, c.SagaID, c.OrderID, s.SagaID, s.OrderID)
	case s.Cancel.CommandID != "" && !s.InternalCancel && s.Cancel.Key != c.Key:
		return fmt.Errorf("%w: cancel %s of a shipment already cancelled under %s", ErrContradiction, c.Key, s.Cancel.Key)
	}
	return nil
}
