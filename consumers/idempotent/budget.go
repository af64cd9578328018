package idempotent

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// recordOverhead is what a polled record costs beyond its key, value and
// headers: franz-go's Record and the decoded event beside it while its
// batch is applied (envelope strings, headers map, span context).
const recordOverhead = 512

// recordBytes is what a polled record counts against Config.MaxBufferedBytes.
func recordBytes(rec *kgo.Record) int64 {
	n := len(rec.Key) + len(rec.Value) + recordOverhead
	for _, h := range rec.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// budget bounds the bytes of the records the runner polled and has not
// finished with: queued at a partition worker or in the batch it applies.
// The poll loop waits for room before it polls, and asks for as many
// records as the room holds at the average size seen so far, so the bound
// is overshot by at most the misestimate of one poll.
type budget struct {
	limit int64
	gauge prometheus.Gauge // follows used

	mu        sync.Mutex
	used      int64
	peak      int64
	perRecord int64         // moving average of recordBytes; 0 until the first poll
	freed     chan struct{} // cap 1: release happened
}

func newBudget(limit int64, gauge prometheus.Gauge) *budget {
	return &budget{limit: limit, gauge: gauge, freed: make(chan struct{}, 1)}
}

func (b *budget) acquire(n int64) {
	b.mu.Lock()
	b.used += n
	b.peak = max(b.peak, b.used)
	b.gauge.Set(float64(b.used))
	b.mu.Unlock()
}

func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.gauge.Set(float64(b.used))
	b.mu.Unlock()
	select {
	case b.freed <- struct{}{}:
	default:
	}
}

// usage returns the bytes held now and the most ever held.
func (b *budget) usage() (used, peak int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak
}

// wait blocks until the records held leave room under the limit, and
// returns how many records to poll: what fits in the room at the average
// record size, between 1 and most. It reports false when ctx is done.
func (b *budget) wait(ctx context.Context, most int) (int, bool) {
	for {
		b.mu.Lock()
		room, per := b.limit-b.used, b.perRecord
		b.mu.Unlock()
		if room > 0 {
			if per == 0 {
				// Nothing polled yet: sizes are unknown, so the first
				// poll assumes records as large as Kafka's default
				// message.max.bytes allows.
				per = 1 << 20
			}
			return int(min(int64(most), max(1, room/per))), true
		}
		select {
		case <-b.freed:
		case <-ctx.Done():
			return 0, false
		}
	}
}

// observe folds a poll's records into the average record size.
func (b *budget) observe(bytes int64, records int) {
	if records == 0 {
		return
	}
	avg := bytes / int64(records)
	b.mu.Lock()
	if b.perRecord == 0 {
		b.perRecord = avg
	} else {
		b.perRecord += (avg - b.perRecord) / 4
	}
	b.mu.Unlock()
}
