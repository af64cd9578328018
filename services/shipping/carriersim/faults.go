package carriersim

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Faults are the ways the carrier misbehaves on purpose. The zero value is
// an honest carrier that ships anywhere. Rates are probabilities in [0, 1]
// drawn per request from streams seeded by Config.Seed; the "next" counters
// hit the next N requests for certain, which is what a test that wants
// "three 503s, then success" sets.
type Faults struct {
	// Latency is added before every API answer (real time).
	Latency time.Duration `json:"latency"`
	// ServerErrorRate is the share of API requests answered 503 before
	// they are executed (no effect, nothing stored).
	ServerErrorRate float64 `json:"server_error_rate"`
	// ServerErrorNext answers the next N API requests 503 before they are
	// executed.
	ServerErrorNext int `json:"server_error_next"`
	// HangRate is the share of create and cancel requests that are
	// executed and recorded (a retry with the same Idempotency-Key replays
	// the result; a lookup by key finds the shipment) but whose answer is
	// withheld until the client gives up: the "was my label bought?"
	// timeout.
	HangRate float64 `json:"hang_rate"`
	// HangNext withholds the answers of the next N create and cancel
	// requests after executing them.
	HangNext int `json:"hang_next"`
	// DeclineRate is the share of valid create requests declined as
	// undeliverable_address.
	DeclineRate float64 `json:"decline_rate"`
	// DeclinePostalCodes are postal codes the carrier does not serve: a
	// create to one is declined as unsupported_postal_code, always.
	DeclinePostalCodes []string `json:"decline_postal_codes"`
}

// DefaultFaults is an honest carrier that does not serve postal code
// 00000, the test address of a decline (as Stripe's test cards are).
func DefaultFaults() Faults { return Faults{DeclinePostalCodes: []string{"00000"}} }

// Knob is one fault setting by name, as used by flags, environment
// variables and the admin API.
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

func countKnob(name, usage string, field func(*Faults) *int) Knob {
	return Knob{Name: name, Usage: usage,
		Get: func(f *Faults) string { return strconv.Itoa(*field(f)) },
		Set: func(f *Faults, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return fmt.Errorf("%s: %q is not a non-negative count", name, v)
			}
			*field(f) = n
			return nil
		}}
}

// Knobs lists every fault setting. Names are kebab-case; carrier-sim
// exposes each as --fault-<name> and CARRIERSIM_FAULT_<NAME>.
func Knobs() []Knob {
	return []Knob{
		{Name: "latency", Usage: "latency added to every API answer (real time)",
			Get: func(f *Faults) string { return f.Latency.String() },
			Set: func(f *Faults, v string) error {
				d, err := time.ParseDuration(v)
				if err != nil || d < 0 {
					return fmt.Errorf("latency: %q is not a non-negative duration", v)
				}
				f.Latency = d
				return nil
			}},
		rateKnob("5xx-rate", "share of API requests answered 503 before execution", func(f *Faults) *float64 { return &f.ServerErrorRate }),
		countKnob("5xx-next", "the next N API requests are answered 503 before execution", func(f *Faults) *int { return &f.ServerErrorNext }),
		rateKnob("hang-rate", "share of create/cancel requests executed but never answered (the client times out)", func(f *Faults) *float64 { return &f.HangRate }),
		countKnob("hang-next", "the next N create/cancel requests are executed but never answered", func(f *Faults) *int { return &f.HangNext }),
		rateKnob("decline-rate", "share of valid creates declined as undeliverable_address", func(f *Faults) *float64 { return &f.DeclineRate }),
		{Name: "decline-postal-codes", Usage: "comma-separated postal codes declined as unsupported_postal_code",
			Get: func(f *Faults) string { return strings.Join(f.DeclinePostalCodes, ",") },
			Set: func(f *Faults, v string) error {
				var codes []string
				for _, c := range strings.Split(v, ",") {
					if c = strings.TrimSpace(c); c != "" {
						codes = append(codes, c)
					}
				}
				f.DeclinePostalCodes = codes
				return nil
			}},
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
	next.DeclinePostalCodes = append([]string(nil), f.DeclinePostalCodes...)
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

func (f Faults) declines(postalCode string) bool {
	for _, c := range f.DeclinePostalCodes {
		if c == postalCode {
			return true
		}
	}
	return false
}

// stream names one independent sequence of random draws, so turning one
// knob does not shift another's draws.
type stream int

const (
	streamIDs stream = iota
	streamServerError
	streamHang
	streamDecline
	numStreams
)

// dice is the simulator's only source of randomness: one PCG stream per
// kind of decision, all derived from the seed.
type dice struct {
	mu      sync.Mutex
	streams [numStreams]*rand.Rand
}

func newDice(seed uint64) *dice {
	d := &dice{}
	for i := range d.streams {
		d.streams[i] = rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15*uint64(i+1)))
	}
	return d
}

// chance reports whether an event of probability p happens. It always
// draws, so the n-th decision of a kind depends only on the seed and n.
func (d *dice) chance(s stream, p float64) bool {
	d.mu.Lock()
	x := d.streams[s].Float64()
	d.mu.Unlock()
	return x < p
}

const idAlphabet = "0123456789ABCDEFGHJKLMNPQRSTUVWXYZ"

// id returns prefix_ followed by n random characters.
func (d *dice) id(prefix string, n int) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	b := make([]byte, 0, len(prefix)+1+n)
	b = append(b, prefix...)
	b = append(b, '_')
	for range n {
		b = append(b, idAlphabet[d.streams[streamIDs].IntN(len(idAlphabet))])
	}
	return string(b)
}
