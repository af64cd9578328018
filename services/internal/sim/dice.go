package sim

import (
	"fmt"
	"math/rand/v2"
	"sync"
)

// Dice is a simulator's only source of randomness: one PCG stream per kind
// of decision (a simulator numbers its kinds 0, 1, …), all derived from the
// seed, guarded by one mutex. Kinds draw apart, so the n-th decision of a
// kind depends only on the seed and n, never on the other knobs.
//
// Its position can be saved and restored, so a restarted simulator
// continues the sequences instead of repeating them (and handing out ids
// again).
type Dice struct {
	mu      sync.Mutex
	sources []*rand.PCG
	streams []*rand.Rand
}

// NewDice returns kinds streams seeded from seed.
func NewDice(seed uint64, kinds int) *Dice {
	d := &Dice{sources: make([]*rand.PCG, kinds), streams: make([]*rand.Rand, kinds)}
	for i := range d.streams {
		d.sources[i] = rand.NewPCG(seed, 0x9e3779b97f4a7c15*uint64(i+1))
		d.streams[i] = rand.New(d.sources[i])
	}
	return d
}

// State returns every stream's position.
func (d *Dice) State() ([][]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([][]byte, len(d.sources))
	for i, src := range d.sources {
		b, err := src.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("saving random stream %d: %w", i, err)
		}
		out[i] = b
	}
	return out, nil
}

// Restore moves the streams to positions saved by State. A snapshot
// without positions (or from a build with fewer kinds) keeps the fresh
// seeded positions for the streams it lacks.
func (d *Dice) Restore(saved [][]byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, b := range saved {
		if i >= len(d.sources) {
			break
		}
		if err := d.sources[i].UnmarshalBinary(b); err != nil {
			return fmt.Errorf("restoring random stream %d: %w", i, err)
		}
	}
	return nil
}

// Chance draws from kind's stream and reports whether an event of
// probability p happens. It always draws, whatever p is.
func (d *Dice) Chance(kind int, p float64) bool {
	d.mu.Lock()
	x := d.streams[kind].Float64()
	d.mu.Unlock()
	return x < p
}

// Draw runs f with kind's stream, under the dice's lock: for a value made
// of several draws (an id).
func (d *Dice) Draw(kind int, f func(r *rand.Rand)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f(d.streams[kind])
}

// ID returns prefix_ followed by n characters of alphabet drawn from
// kind's stream: the shape of the simulated parties' object ids.
func (d *Dice) ID(kind int, prefix, alphabet string, n int) string {
	b := make([]byte, 0, len(prefix)+1+n)
	b = append(b, prefix...)
	b = append(b, '_')
	d.Draw(kind, func(r *rand.Rand) {
		for range n {
			b = append(b, alphabet[r.IntN(len(alphabet))])
		}
	})
	return string(b)
}
