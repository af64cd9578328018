package idempotent

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Polls that arrive while a partition waits are applied together: a
// backlog must make batches bigger, not longer queues of small ones.
func TestPushTopsUpTheWaitingBatch(t *testing.T) {
	r := &Runner{cfg: Config{MaxBatchRecords: 5, QueuedBatches: 100, MaxBufferedBytes: 1 << 30},
		budget: newBudget(1<<30, prometheus.NewGauge(prometheus.GaugeOpts{Name: "buffered"}))}
	w := newPartitionWorker(r, topicPartition{"t", 0})
	var offset int64
	poll := func(n int) []*kgo.Record {
		recs := make([]*kgo.Record, n, n+10) // spare capacity the client may reuse
		for i := range recs {
			recs[i] = &kgo.Record{Offset: offset}
			offset++
		}
		return recs
	}
	first := poll(3)
	w.push(first, 3)
	w.push(poll(3), 6)
	w.push(poll(6), 12)
	var sizes []int
	var next int64
	for _, q := range w.queue {
		sizes = append(sizes, len(q.recs))
		for _, r := range q.recs {
			if r.Offset != next {
				t.Fatalf("queued offsets out of order: got %d, want %d", r.Offset, next)
			}
			next++
		}
	}
	if len(sizes) != 3 || sizes[0] != 5 || sizes[1] != 5 || sizes[2] != 2 {
		t.Fatalf("queued batch sizes %v; want [5 5 2]", sizes)
	}
	if w.queue[2].hwm != 12 {
		t.Fatalf("last batch high watermark %d; want the latest poll's 12", w.queue[2].hwm)
	}
	// Topping up must not write into the slice the client handed over.
	if extra := first[:cap(first)][3]; extra != nil {
		t.Fatalf("push wrote record %d into the polled slice's spare capacity", extra.Offset)
	}
}
