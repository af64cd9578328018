package brokersim

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"time"
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
	// Latency is added before every API answer.
	Latency time.Duration `json:"latency"`
	// RateLimitRate is the share of requests answered 429 before they are
	// executed (on top of the real rate limit).
	RateLimitRate float64 `json:"rate_limit_rate"`
	// ServerErrorRate is the share of requests answered 500 before they are
	// executed (nothing stored).
	ServerErrorRate float64 `json:"server_error_rate"`
	// HangRate is the share of requests executed and recorded (a retry
	// with the same Idempotency-Key gets the result) whose answer is
	// withheld until the client gives up or the simulator closes: the "did
	// my journal happen?" timeout.
	HangRate float64 `json:"hang_rate"`
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
// each as --fault-<name>.
func Knobs() []Knob {
	return []Knob{
		durationKnob("latency", "latency added to every API answer (real time)", func(f *Faults) *time.Duration { return &f.Latency }),
		rateKnob("429-rate", "share of requests refused with 429 before execution", func(f *Faults) *float64 { return &f.RateLimitRate }),
		rateKnob("5xx-rate", "share of requests refused with 500 before execution", func(f *Faults) *float64 { return &f.ServerErrorRate }),
		rateKnob("hang-rate", "share of requests executed but never answered (the client times out)", func(f *Faults) *float64 { return &f.HangRate }),
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

// dice is the simulator's only source of randomness: one PCG stream per kind
// of decision, all derived from the seed. Its position is part of the
// snapshot, so a restarted simulator continues its sequences instead of
// handing out the same ids again.
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

func (d *dice) state() ([][]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([][]byte, len(d.sources))
	for i, src := range d.sources {
		b, err := src.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("brokersim: saving random stream %d: %w", i, err)
		}
		out[i] = b
	}
	return out, nil
}

func (d *dice) restore(saved [][]byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, b := range saved {
		if i >= len(d.sources) {
			break
		}
		if err := d.sources[i].UnmarshalBinary(b); err != nil {
			return fmt.Errorf("brokersim: restoring random stream %d: %w", i, err)
		}
	}
	return nil
}

// chance always draws, so the n-th decision of a kind depends only on the
// seed and n, never on the knob's value.
func (d *dice) chance(s stream, p float64) bool {
	d.mu.Lock()
	x := d.streams[s].Float64()
	d.mu.Unlock()
	return x < p
}

// fill fills b from stream s.
func (d *dice) fill(s stream, b []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range b {
		b[i] = byte(d.streams[s].Uint32())
	}
}

// uuid returns a version-4 UUID from the id stream, the shape of Alpaca's
// account, journal and transfer ids.
func (d *dice) uuid() string {
	var b [16]byte
	d.fill(streamIDs, b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// digits returns n decimal digits from the id stream.
func (d *dice) digits(n int) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('0' + d.streams[streamIDs].IntN(10))
	}
	return string(b)
}
