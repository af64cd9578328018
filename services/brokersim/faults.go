package brokersim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/concordhq/concord/services/internal/sim"
)

// Faults are the ways the simulator misbehaves on purpose. The zero value is
// an honest broker. Rates are probabilities in [0, 1] drawn per request, per
// SSE message or per journal/transfer; delays are on the simulator's Clock
// except Latency, which is real time (it slows the answer, not the world).
//
// Every draw comes from a random stream seeded by Config.Seed, one stream per
// kind of decision, so the same requests in the same order meet the same
// faults, and turning one knob does not shift another's draws.
type Faults struct {
	// Latency, 429s and 500s before execution, answers withheld after it.
	sim.APIFaults
	// SSEDisconnectRate is the share of SSE messages after which the server
	// closes the stream; the client reconnects from its cursor.
	SSEDisconnectRate float64 `json:"sse_disconnect_rate"`
	// SSEDropRate is the share of SSE messages a connection never sends. The
	// event still exists: a replay from an earlier cursor sends it.
	SSEDropRate float64 `json:"sse_drop_rate"`
	// SSEDuplicateRate is the share of SSE messages sent twice.
	SSEDuplicateRate float64 `json:"sse_duplicate_rate"`
	// SSEReorderRate is the share of SSE messages held back and sent after
	// the next message of another account; one account's messages keep
	// their order, as Alpaca promises.
	SSEReorderRate float64 `json:"sse_reorder_rate"`
	// ReturnRate is the share of completed ACH transfers the bank returns
	// ReturnDelay later (COMPLETE → RETURNED).
	ReturnRate  float64       `json:"return_rate"`
	ReturnDelay time.Duration `json:"return_delay"`
	// CorrectionRate is the share of executed cash journals corrected
	// CorrectionDelay later: the original moves to correct and a new journal
	// with another amount is executed in its place.
	CorrectionRate  float64       `json:"correction_rate"`
	CorrectionDelay time.Duration `json:"correction_delay"`
	// SlowSettlementRate is the share of journals and transfers that take
	// SlowSettlementDelay per step instead of the normal settlement delay.
	SlowSettlementRate  float64       `json:"slow_settlement_rate"`
	SlowSettlementDelay time.Duration `json:"slow_settlement_delay"`
}

// DefaultFaults is an honest broker with the delays a faulty one would use.
func DefaultFaults() Faults {
	return Faults{ReturnDelay: 30 * time.Second, CorrectionDelay: 20 * time.Second, SlowSettlementDelay: 30 * time.Second}
}

// Knob is one fault setting by name, as used by flags, environment variables
// and the admin API.
type Knob = sim.Knob[Faults]

func rateKnob(name, usage string, field func(*Faults) *float64) Knob {
	return sim.RateKnob(name, usage, field)
}

func durationKnob(name, usage string, field func(*Faults) *time.Duration) Knob {
	return sim.DurationKnob(name, usage, field)
}

// Knobs lists every fault setting. Names are kebab-case; the binary exposes
// each as --fault-<name>.
func Knobs() []Knob {
	return append(sim.APIKnobs(func(f *Faults) *sim.APIFaults { return &f.APIFaults }),
		rateKnob("sse-disconnect-rate", "share of SSE messages after which the stream is closed", func(f *Faults) *float64 { return &f.SSEDisconnectRate }),
		rateKnob("sse-drop-rate", "share of SSE messages never sent on a connection", func(f *Faults) *float64 { return &f.SSEDropRate }),
		rateKnob("sse-duplicate-rate", "share of SSE messages sent twice", func(f *Faults) *float64 { return &f.SSEDuplicateRate }),
		rateKnob("sse-reorder-rate", "share of SSE messages sent after the next message of another account", func(f *Faults) *float64 { return &f.SSEReorderRate }),
		rateKnob("return-rate", "share of completed ACH transfers returned later (COMPLETE → RETURNED)", func(f *Faults) *float64 { return &f.ReturnRate }),
		durationKnob("return-delay", "how long after COMPLETE a return happens", func(f *Faults) *time.Duration { return &f.ReturnDelay }),
		rateKnob("correction-rate", "share of executed cash journals corrected later (new journal id, original → correct)", func(f *Faults) *float64 { return &f.CorrectionRate }),
		durationKnob("correction-delay", "how long after execution a correction happens", func(f *Faults) *time.Duration { return &f.CorrectionDelay }),
		rateKnob("slow-settlement-rate", "share of journals and transfers that settle slowly", func(f *Faults) *float64 { return &f.SlowSettlementRate }),
		durationKnob("slow-settlement-delay", "delay per settlement step of a slow journal or transfer", func(f *Faults) *time.Duration { return &f.SlowSettlementDelay }),
	)
}

// Values returns every knob's current value by name.
func (f Faults) Values() map[string]string { return sim.Values(f, Knobs()) }

// Apply sets the named knobs from their string values. It changes nothing
// unless every value is valid; an unknown name is an error.
func (f *Faults) Apply(values map[string]string) error { return sim.Apply(f, Knobs(), values) }

// The kinds of random decision, each drawn from its own stream of the
// simulator's dice (sim.Dice), whose position is part of the snapshot: a
// restarted simulator continues its sequences instead of handing out the
// same ids again.
const (
	streamIDs = iota
	streamRateLimit
	streamServerError
	streamSSEDisconnect
	streamSSEDrop
	streamSSEDuplicate
	streamSSEReorder
	streamReturn
	streamCorrection
	streamSlow
	streamULID
	streamHang
	numStreams
)

// dice draws the simulator's ids on top of sim.Dice.
type dice struct{ *sim.Dice }

func newDice(seed uint64) dice { return dice{sim.NewDice(seed, numStreams)} }

// fill fills b from stream s.
func (d dice) fill(s int, b []byte) {
	d.Draw(s, func(r *rand.Rand) {
		for i := range b {
			b[i] = byte(r.Uint32())
		}
	})
}

// uuid returns a version-4 UUID from the id stream, the shape of Alpaca's
// account, journal and transfer ids.
func (d dice) uuid() string {
	var b [16]byte
	d.fill(streamIDs, b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// digits returns n decimal digits from the id stream.
func (d dice) digits(n int) string {
	b := make([]byte, n)
	d.Draw(streamIDs, func(r *rand.Rand) {
		for i := range b {
			b[i] = byte('0' + r.IntN(10))
		}
	})
	return string(b)
}

// Clock tells the simulator what time it is. Every timestamp it hands out
// (created_at, event times, ULIDs, rate-limit windows, scheduled
// settlements, returns and corrections) comes from it.
type Clock = sim.Clock

// ManualClock is a Clock that moves only when told to.
type ManualClock = sim.ManualClock

// NewManualClock returns a clock stopped at start.
func NewManualClock(start time.Time) *ManualClock { return sim.NewManualClock(start) }
