package providersim

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"time"
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
	// Latency is added before every API answer.
	Latency time.Duration `json:"latency"`
	// RateLimitRate is the share of API requests answered with Stripe's 429
	// rate_limit error before they are executed (no effect, nothing stored).
	RateLimitRate float64 `json:"rate_limit_rate"`
	// ServerErrorRate is the share of API requests answered with a 500
	// api_error before they are executed (no effect, nothing stored).
	ServerErrorRate float64 `json:"server_error_rate"`
	// HangRate is the share of API requests that are executed and recorded
	// (a retry with the same Idempotency-Key replays the result) but whose
	// answer is withheld until the client gives up or the simulator closes:
	// the "did my charge happen?" timeout.
	HangRate float64 `json:"hang_rate"`
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
type Knob struct {
	Name  string
	Usage string
	Get   func(f *Faults) string
	Set   func(f *Faults, v string) error
}

func rateKnob(name, usage string, field func(*Faults) *float64) Knob {
	return Knob{Name: name, Usage: usage,
		Get: func(f *Faults) string { return strconv.FormatFloat(*field(f), 'g', -1, 64) },
		Set: func(f *Faults, v string) error {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil || x < 0 || x > 1 {
				return fmt.Errorf("%s: %q is not a rate between 0 and 1", name, v)
			}
			*field(f) = x
			return nil
		}}
}

func durationKnob(name, usage string, field func(*Faults) *time.Duration) Knob {
	return Knob{Name: name, Usage: usage,
		Get: func(f *Faults) string { return field(f).String() },
		Set: func(f *Faults, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return fmt.Errorf("%s: %q is not a non-negative duration", name, v)
			}
			*field(f) = d
			return nil
		}}
}

// Knobs lists every fault setting. Names are kebab-case; the binary exposes
// each as --fault-<name> and PROVIDERSIM_FAULT_<NAME>.
func Knobs() []Knob {
	return []Knob{
		durationKnob("latency", "latency added to every API answer (real time)", func(f *Faults) *time.Duration { return &f.Latency }),
		rateKnob("429-rate", "share of API requests refused with 429 rate_limit before execution", func(f *Faults) *float64 { return &f.RateLimitRate }),
		rateKnob("5xx-rate", "share of API requests refused with 500 api_error before execution", func(f *Faults) *float64 { return &f.ServerErrorRate }),
		rateKnob("hang-rate", "share of API requests executed but never answered (client times out)", func(f *Faults) *float64 { return &f.HangRate }),
		rateKnob("webhook-drop-rate", "share of webhook deliveries never sent", func(f *Faults) *float64 { return &f.WebhookDropRate }),
		rateKnob("webhook-duplicate-rate", "share of webhook deliveries sent twice", func(f *Faults) *float64 { return &f.WebhookDuplicateRate }),
		rateKnob("webhook-reorder-rate", "share of webhook deliveries held until the next one is sent", func(f *Faults) *float64 { return &f.WebhookReorderRate }),
		rateKnob("webhook-delay-rate", "share of webhook deliveries sent webhook-delay late", func(f *Faults) *float64 { return &f.WebhookDelayRate }),
		durationKnob("webhook-delay", "delay of delayed webhooks; longest hold of reordered ones", func(f *Faults) *time.Duration { return &f.WebhookDelay }),
		rateKnob("processing-rate", "share of succeeding payments that stay processing for processing-delay", func(f *Faults) *float64 { return &f.ProcessingRate }),
		durationKnob("processing-delay", "how long processing payments wait before they succeed", func(f *Faults) *time.Duration { return &f.ProcessingDelay }),
		rateKnob("late-reversal-rate", "share of succeeded payments refunded by the provider later", func(f *Faults) *float64 { return &f.LateReversalRate }),
		durationKnob("late-reversal-delay", "how long after success a late reversal happens", func(f *Faults) *time.Duration { return &f.LateReversalDelay }),
	}
}

// Values returns every knob's current value by name.
func (f Faults) Values() map[string]string {
	out := make(map[string]string)
	for _, k := range Knobs() {
		out[k.Name] = k.Get(&f)
	}
	return out
}

// Apply sets the named knobs from their string values. It changes nothing
// unless every value is valid; an unknown name is an error.
func (f *Faults) Apply(values map[string]string) error {
	next := *f
	byName := make(map[string]Knob)
	for _, k := range Knobs() {
		byName[k.Name] = k
	}
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		k, ok := byName[n]
		if !ok {
			return fmt.Errorf("unknown fault knob %q", n)
		}
		if err := k.Set(&next, values[n]); err != nil {
			return err
		}
	}
	*f = next
	return nil
}

// stream names one independent sequence of random draws.
type stream int

const (
	streamIDs stream = iota
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

// dice is the simulator's only source of randomness: one PCG stream per kind
// of decision, all derived from the seed, guarded by one mutex.
//
// Its position is part of the snapshot, so a restarted simulator continues
// the sequences instead of repeating them (and handing out ids again).
type dice struct {
	mu      sync.Mutex
	sources [numStreams]*rand.PCG
	streams [numStreams]*rand.Rand
}

func newDice(seed uint64) *dice {
	d := &dice{}
	for i := range d.streams {
		d.sources[i] = rand.NewPCG(seed, 0x9e3779b97f4a7c15*uint64(i+1))
		d.streams[i] = rand.New(d.sources[i])
	}
	return d
}

// state returns every stream's position.
func (d *dice) state() ([][]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([][]byte, len(d.sources))
	for i, src := range d.sources {
		b, err := src.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("providersim: saving random stream %d: %w", i, err)
		}
		out[i] = b
	}
	return out, nil
}

// restore moves the streams to positions saved by state. A snapshot
// without positions (or from a build with fewer streams) keeps the fresh
// seeded positions for the streams it lacks.
func (d *dice) restore(saved [][]byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, b := range saved {
		if i >= len(d.sources) {
			break
		}
		if err := d.sources[i].UnmarshalBinary(b); err != nil {
			return fmt.Errorf("providersim: restoring random stream %d: %w", i, err)
		}
	}
	return nil
}

// chance draws from stream s and reports whether an event of probability p
// happens. It always draws, so the n-th decision of a kind depends only on
// the seed and n, never on the other knobs.
func (d *dice) chance(s stream, p float64) bool {
	d.mu.Lock()
	x := d.streams[s].Float64()
	d.mu.Unlock()
	return x < p
}

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// id returns prefix_ followed by 24 random characters from the object-id
// stream, Stripe's id shape.
func (d *dice) id(prefix string) string { return d.idFrom(streamIDs, prefix) }

// idFrom is id drawn from stream s.
func (d *dice) idFrom(s stream, prefix string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	b := make([]byte, 0, len(prefix)+25)
	b = append(b, prefix...)
	b = append(b, '_')
	for range 24 {
		b = append(b, idAlphabet[d.streams[s].IntN(len(idAlphabet))])
	}
	return string(b)
}
