package providersim

import (
	"time"

	"github.com/concordhq/concord/services/internal/sim"
)

// Faults are the ways the simulator misbehaves on purpose. The zero value is
// an honest provider. Rates are probabilities in [0, 1] drawn per request,
// per webhook delivery or per payment; durations are measured on the
// simulator's Clock except Latency, which is real time (it slows the
// answer, not the world).
//
// Every draw comes from a random stream seeded by Config.Seed, one stream per
// kind of decision, so two runs that send the same requests in the same order
// see the same faults, and turning one knob does not shift another's draws.
type Faults struct {
	// Latency, 429s and 500s before execution, answers withheld after it.
	sim.APIFaults
	// WebhookDropRate is the share of webhook deliveries never sent. The
	// event still exists and is listed by GET /v1/events.
	WebhookDropRate float64 `json:"webhook_drop_rate"`
	// WebhookDuplicateRate is the share of webhook deliveries sent twice.
	WebhookDuplicateRate float64 `json:"webhook_duplicate_rate"`
	// WebhookReorderRate is the share of webhook deliveries held back until
	// the next delivery to the same endpoint has been sent (or WebhookDelay
	// has passed), so they arrive out of order.
	WebhookReorderRate float64 `json:"webhook_reorder_rate"`
	// WebhookDelayRate is the share of webhook deliveries sent WebhookDelay
	// after the event.
	WebhookDelayRate float64 `json:"webhook_delay_rate"`
	// WebhookDelay is the delay for WebhookDelayRate and the longest a
	// reordered delivery is held.
	WebhookDelay time.Duration `json:"webhook_delay"`
	// ProcessingRate is the share of otherwise succeeding payments that stay
	// "processing" for ProcessingDelay before they succeed.
	ProcessingRate float64 `json:"processing_rate"`
	// ProcessingDelay is how long a processing payment (from ProcessingRate
	// or the pm_card_processing test method) waits before it succeeds.
	ProcessingDelay time.Duration `json:"processing_delay"`
	// LateReversalRate is the share of succeeded payments fully refunded by
	// the provider LateReversalDelay after they succeeded (the money comes
	// back after we were told it was ours).
	LateReversalRate float64 `json:"late_reversal_rate"`
	// LateReversalDelay is how long after success a late reversal happens.
	LateReversalDelay time.Duration `json:"late_reversal_delay"`
}

// DefaultFaults is an honest provider with the delays a faulty one would use.
func DefaultFaults() Faults {
	return Faults{WebhookDelay: 5 * time.Second, ProcessingDelay: 10 * time.Second, LateReversalDelay: 30 * time.Second}
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
// each as --fault-<name> and PROVIDERSIM_FAULT_<NAME>.
func Knobs() []Knob {
	return append(sim.APIKnobs(func(f *Faults) *sim.APIFaults { return &f.APIFaults }),
		rateKnob("webhook-drop-rate", "share of webhook deliveries never sent", func(f *Faults) *float64 { return &f.WebhookDropRate }),
		rateKnob("webhook-duplicate-rate", "share of webhook deliveries sent twice", func(f *Faults) *float64 { return &f.WebhookDuplicateRate }),
		rateKnob("webhook-reorder-rate", "share of webhook deliveries held until the next one is sent", func(f *Faults) *float64 { return &f.WebhookReorderRate }),
		rateKnob("webhook-delay-rate", "share of webhook deliveries sent webhook-delay late", func(f *Faults) *float64 { return &f.WebhookDelayRate }),
		durationKnob("webhook-delay", "delay of delayed webhooks; longest hold of reordered ones", func(f *Faults) *time.Duration { return &f.WebhookDelay }),
		rateKnob("processing-rate", "share of succeeding payments that stay processing for processing-delay", func(f *Faults) *float64 { return &f.ProcessingRate }),
		durationKnob("processing-delay", "how long processing payments wait before they succeed", func(f *Faults) *time.Duration { return &f.ProcessingDelay }),
		rateKnob("late-reversal-rate", "share of succeeded payments refunded by the provider later", func(f *Faults) *float64 { return &f.LateReversalRate }),
		durationKnob("late-reversal-delay", "how long after success a late reversal happens", func(f *Faults) *time.Duration { return &f.LateReversalDelay }),
	)
}

// Values returns every knob's current value by name.
func (f Faults) Values() map[string]string { return sim.Values(f, Knobs()) }

// Apply sets the named knobs from their string values. It changes nothing
// unless every value is valid; an unknown name is an error.
func (f *Faults) Apply(values map[string]string) error { return sim.Apply(f, Knobs(), values) }

// The kinds of random decision, each drawn from its own stream of the
// simulator's dice (sim.Dice), whose position is part of the snapshot: a
// restarted simulator continues its sequences instead of repeating them
// (and handing out ids again).
const (
	streamIDs = iota
	streamRateLimit
	streamServerError
	streamHang
	streamWebhookDrop
	streamWebhookDuplicate
	streamWebhookReorder
	streamWebhookDelay
	streamProcessing
	streamLateReversal
	streamRequestIDs
	numStreams
)

// dice draws the simulator's ids on top of sim.Dice.
type dice struct{ *sim.Dice }

func newDice(seed uint64) dice { return dice{sim.NewDice(seed, numStreams)} }

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// id returns prefix_ followed by 24 random characters from the object-id
// stream, Stripe's id shape.
func (d dice) id(prefix string) string { return d.idFrom(streamIDs, prefix) }

// idFrom is id drawn from stream s.
func (d dice) idFrom(s int, prefix string) string { return d.ID(s, prefix, idAlphabet, 24) }

// Clock tells the simulator what time it is. Every timestamp the simulator
// hands out (created, idempotency expiry, rate-limit buckets, scheduled
// transitions, webhook due times and signatures) comes from it.
type Clock = sim.Clock

// ManualClock is a Clock that moves only when told to.
type ManualClock = sim.ManualClock

// NewManualClock returns a clock stopped at start.
func NewManualClock(start time.Time) *ManualClock { return sim.NewManualClock(start) }
