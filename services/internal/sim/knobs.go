package sim

import (
	"fmt"
	"sort"
	"strconv"
	"time"
)

// Knob is one fault setting of a simulator whose settings are F, by name,
// as flags, environment variables and the admin API use it.
type Knob[F any] struct {
	Name  string
	Usage string
	Get   func(f *F) string
	Set   func(f *F, v string) error
}

// RateKnob is a share between 0 and 1 held in field.
func RateKnob[F any](name, usage string, field func(*F) *float64) Knob[F] {
	return Knob[F]{Name: name, Usage: usage,
		Get: func(f *F) string { return strconv.FormatFloat(*field(f), 'g', -1, 64) },
		Set: func(f *F, v string) error {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil || x < 0 || x > 1 {
				return fmt.Errorf("%s: %q is not a rate between 0 and 1", name, v)
			}
			*field(f) = x
			return nil
		}}
}

// DurationKnob is a non-negative duration held in field.
func DurationKnob[F any](name, usage string, field func(*F) *time.Duration) Knob[F] {
	return Knob[F]{Name: name, Usage: usage,
		Get: func(f *F) string { return field(f).String() },
		Set: func(f *F, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return fmt.Errorf("%s: %q is not a non-negative duration", name, v)
			}
			*field(f) = d
			return nil
		}}
}

// Values returns every knob's value in f by name.
func Values[F any](f F, knobs []Knob[F]) map[string]string {
	out := make(map[string]string, len(knobs))
	for _, k := range knobs {
		out[k.Name] = k.Get(&f)
	}
	return out
}

// Apply sets the named knobs of f from their string values. It changes
// nothing unless every value is valid; an unknown name is an error.
func Apply[F any](f *F, knobs []Knob[F], values map[string]string) error {
	next := *f
	byName := make(map[string]Knob[F], len(knobs))
	for _, k := range knobs {
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

// CountKnob is a non-negative count held in field.
func CountKnob[F any](name, usage string, field func(*F) *int) Knob[F] {
	return Knob[F]{Name: name, Usage: usage,
		Get: func(f *F) string { return strconv.Itoa(*field(f)) },
		Set: func(f *F, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return fmt.Errorf("%s: %q is not a non-negative count", name, v)
			}
			*field(f) = n
			return nil
		}}
}

// APIFaults are the faults of a simulated API that answers requests:
// latency, refusals before execution, and answers withheld after it.
// A simulator embeds them in its own fault settings (JSON keeps them flat).
type APIFaults struct {
	// Latency is added before every API answer (real time: it slows the
	// answer, not the simulated world).
	Latency time.Duration `json:"latency"`
	// RateLimitRate is the share of requests answered 429 before they are
	// executed (no effect, nothing stored), on top of any real limit.
	RateLimitRate float64 `json:"rate_limit_rate"`
	// ServerErrorRate is the share of requests answered 500 before they are
	// executed (no effect, nothing stored).
	ServerErrorRate float64 `json:"server_error_rate"`
	// HangRate is the share of requests executed and recorded (a retry
	// with the same Idempotency-Key gets the result) whose answer is
	// withheld until the client gives up or the simulator closes: the
	// "did it happen?" timeout.
	HangRate float64 `json:"hang_rate"`
}

// APIKnobs are the knobs of the APIFaults that field finds in F.
func APIKnobs[F any](field func(*F) *APIFaults) []Knob[F] {
	return []Knob[F]{
		DurationKnob("latency", "latency added to every API answer (real time)", func(f *F) *time.Duration { return &field(f).Latency }),
		RateKnob("429-rate", "share of API requests refused with 429 before execution", func(f *F) *float64 { return &field(f).RateLimitRate }),
		RateKnob("5xx-rate", "share of API requests refused with 500 before execution", func(f *F) *float64 { return &field(f).ServerErrorRate }),
		RateKnob("hang-rate", "share of API requests executed but never answered (the client times out)", func(f *F) *float64 { return &field(f).HangRate }),
	}
}
