package carriersim

import (
	"strings"
	"time"

	"github.com/concordhq/concord/services/internal/sim"
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
type Knob = sim.Knob[Faults]

func rateKnob(name, usage string, field func(*Faults) *float64) Knob {
	return sim.RateKnob(name, usage, field)
}

func countKnob(name, usage string, field func(*Faults) *int) Knob {
	return sim.CountKnob(name, usage, field)
}

// Knobs lists every fault setting. Names are kebab-case; carrier-sim
// exposes each as --fault-<name> and CARRIERSIM_FAULT_<NAME>.
func Knobs() []Knob {
	return []Knob{
		sim.DurationKnob("latency", "latency added to every API answer (real time)", func(f *Faults) *time.Duration { return &f.Latency }),
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
func (f Faults) Values() map[string]string { return sim.Values(f, Knobs()) }

// Apply sets the named knobs from their string values. It changes nothing
// unless every value is valid; an unknown name is an error. Knobs replace
// the postal-code list, never edit it, so the copy shares it safely.
func (f *Faults) Apply(values map[string]string) error { return sim.Apply(f, Knobs(), values) }

func (f Faults) declines(postalCode string) bool {
	for _, c := range f.DeclinePostalCodes {
		if c == postalCode {
			return true
		}
	}
	return false
}

// The kinds of random decision, each drawn from its own stream of the
// simulator's dice (sim.Dice), so turning one knob does not shift another's
// draws.
const (
	streamIDs = iota
	streamServerError
	streamHang
	streamDecline
	numStreams
)

// dice draws the carrier's ids on top of sim.Dice.
type dice struct{ *sim.Dice }

func newDice(seed uint64) dice { return dice{sim.NewDice(seed, numStreams)} }

const idAlphabet = "0123456789ABCDEFGHJKLMNPQRSTUVWXYZ"

// id returns prefix_ followed by n random characters.
func (d dice) id(prefix string, n int) string { return d.ID(streamIDs, prefix, idAlphabet, n) }
