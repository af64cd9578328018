package idempotent

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"
)

// StartBatch is the runner's start of a BatchHandler's call over evs, each
// from a record whose context is the matching recordContexts entry: the
// context to call the handler with and the spans it started.
func StartBatch(ctx context.Context, evs []Event, recordContexts []context.Context) (context.Context, []trace.Span) {
	ds := make([]decoded, len(evs))
	for i, ev := range evs {
		ds[i] = decoded{rec: &kgo.Record{Topic: ev.Topic, Context: recordContexts[i]}, ev: ev}
	}
	bctx, spans, _ := (&Runner{cfg: Config{Group: "test"}}).startBatch(ctx, ds, nil)
	return bctx, spans
}

// Waiting is how many batches wait for a slot to join (Config.JoinPartitions).
func Waiting(r *Runner) int {
	r.joinMu.Lock()
	defer r.joinMu.Unlock()
	return len(r.waiting)
}
