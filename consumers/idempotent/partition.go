package idempotent

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/infra/backoff"
)

// partitionWorker applies the batches of one partition in order. The poll
// loop pushes; the worker pops. When too many batches wait, or the
// partition holds more than its share of Config.MaxBufferedBytes, the
// partition's fetching is paused, so a slow partition neither blocks the
// others nor buffers without bound.
type partitionWorker struct {
	r  *Runner
	tp topicPartition

	mu      sync.Mutex
	queue   []queued
	held    int64 // recordBytes of the queue and of the batch being applied
	exited  bool  // run returned: a push is dropped, not held
	paused  bool
	wake    chan struct{} // cap 1: a push happened
	stopped chan struct{} // closed by stop
	done    chan struct{} // closed when run returns
	once    sync.Once
}

type queued struct {
	recs  []*kgo.Record
	bytes int64 // recordBytes of recs
	hwm   int64
}

func newPartitionWorker(r *Runner, tp topicPartition) *partitionWorker {
	return &partitionWorker{r: r, tp: tp, wake: make(chan struct{}, 1), stopped: make(chan struct{}), done: make(chan struct{})}
}

// push queues records in batches of at most MaxBatchRecords, topping up
// the last waiting batch first. A partition that waits (for a slot under
// MaxConcurrentPartitions, or behind a slow batch) thus applies what piled
// up in few large transactions instead of one small one per poll: the
// fixed cost of a batch is most of the cost of a small one. Their bytes
// count against the budget until the batch they join is applied or
// dropped. It returns those bytes.
func (w *partitionWorker) push(recs []*kgo.Record, hwm int64) (held int64) {
	w.mu.Lock()
	if w.exited {
		// Revoked between the poll and this push: nobody applies them,
		// and the partition's next owner reads them again.
		w.mu.Unlock()
		return 0
	}
	before := w.held
	if n := len(w.queue); n > 0 {
		last := &w.queue[n-1]
		k := min(len(recs), w.r.cfg.MaxBatchRecords-len(last.recs))
		if k > 0 {
			// last.recs has no spare capacity (see below), so this append
			// copies rather than writing into the client's slice.
			last.recs = append(last.recs, recs[:k]...)
			last.bytes += w.hold(recs[:k])
			last.hwm = hwm
			recs = recs[k:]
		}
	}
	for len(recs) > 0 {
		n := min(len(recs), w.r.cfg.MaxBatchRecords)
		w.queue = append(w.queue, queued{recs[:n:n], w.hold(recs[:n]), hwm})
		recs = recs[n:]
	}
	if !w.paused && w.full() {
		w.paused = true
		w.r.cl.PauseFetchPartitions(map[string][]int32{w.tp.topic: {w.tp.partition}})
	}
	held = w.held - before
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return held
}

// hold counts recs against the partition's share and the runner's budget.
// w.mu is held.
func (w *partitionWorker) hold(recs []*kgo.Record) int64 {
	var n int64
	for _, rec := range recs {
		n += recordBytes(rec)
	}
	w.held += n
	w.r.budget.acquire(n)
	return n
}

// full reports whether the partition must stop fetching: QueuedBatches
// wait, or it holds its share of the budget (which keeps one stuck
// partition from taking the room the others need). w.mu is held.
func (w *partitionWorker) full() bool {
	return len(w.queue) >= w.r.cfg.QueuedBatches || w.held >= w.r.partitionShare()
}

// resumeIfRoom resumes a paused partition that has room again. w.mu is held.
func (w *partitionWorker) resumeIfRoom() {
	if w.paused && !w.full() {
		w.paused = false
		w.r.cl.ResumeFetchPartitions(map[string][]int32{w.tp.topic: {w.tp.partition}})
	}
}

func (w *partitionWorker) pop() (queued, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) == 0 {
		return queued{}, false
	}
	q := w.queue[0]
	w.queue[0] = queued{}
	w.queue = w.queue[1:]
	w.resumeIfRoom()
	return q, true
}

// finished gives back the bytes of a batch that was applied or dropped.
func (w *partitionWorker) finished(bytes int64) {
	w.mu.Lock()
	w.held -= bytes
	w.resumeIfRoom()
	w.mu.Unlock()
	w.r.budget.release(bytes)
}

func (w *partitionWorker) wasPaused() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.paused
}

func (w *partitionWorker) stop() { w.once.Do(func() { close(w.stopped) }) }

func (w *partitionWorker) isStopped() bool {
	select {
	case <-w.stopped:
		return true
	default:
		return false
	}
}

func (w *partitionWorker) run() {
	defer close(w.done)
	defer w.exit()
	for {
		if w.isStopped() {
			return
		}
		q, ok := w.pop()
		if !ok {
			select {
			case <-w.wake:
				continue
			case <-w.stopped:
				return
			}
		}
		ok = w.apply(q)
		w.finished(q.bytes)
		if !ok {
			return
		}
	}
}

// exit drops the queued batches (their offsets were never marked, so the
// partition's next owner reads them again) and gives back their bytes.
func (w *partitionWorker) exit() {
	w.mu.Lock()
	w.exited = true
	dropped := w.held
	w.held, w.queue = 0, nil
	w.mu.Unlock()
	w.r.budget.release(dropped)
}

// apply applies one batch, retrying transient failures with backoff until
// it commits or the worker is stopped. It reports false when it gave up
// because of a stop; the batch's offsets were not marked then.
func (w *partitionWorker) apply(q queued) bool {
	r := w.r
	recs := make([]decoded, len(q.recs))
	for i, rec := range q.recs {
		recs[i] = decodeRecord(r.cfg.Catalog, r.handles, rec)
	}
	last := q.recs[len(q.recs)-1]
	for attempt := 0; ; attempt++ {
		res, took, ok, err := w.applyOnce(recs)
		if !ok {
			return false
		}
		if err == nil {
			if r.cfg.AfterDBCommit != nil {
				r.cfg.AfterDBCommit(last.Topic, last.Partition, last.Offset)
			}
			r.cl.MarkCommitOffsets(map[string]map[int32]kgo.EpochOffset{
				last.Topic: {last.Partition: {Epoch: last.LeaderEpoch, Offset: last.Offset + 1}},
			})
			r.observe(w.tp, res, took, q.hwm-(last.Offset+1))
			return true
		}
		r.m.retries.WithLabelValues(r.cfg.Group, w.tp.topic).Inc()
		r.m.retried.Add(1)
		// Jittered, so that partitions failing together do not retry in lockstep.
		delay := backoff.Jittered(backoff.Exponential(attempt+1, r.cfg.RetryBackoffMin, r.cfg.RetryBackoffMax))
		r.cfg.Logger.Warn("batch failed, will retry; offsets do not move", "group", r.cfg.Group,
			"topic", last.Topic, "partition", last.Partition, "from_offset", q.recs[0].Offset, "to_offset", last.Offset,
			"attempt", attempt+1, "retry_in", delay, "err", err)
		if r.workCtx.Err() != nil {
			return false
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-w.stopped:
			t.Stop()
			return false
		}
	}
}

// joiner is a batch waiting for a slot (Config.JoinPartitions).
type joiner struct {
	tp   topicPartition
	recs []decoded
	done chan joined // cap 1: the outcome, from the batch that took it along
}

type joined struct {
	res  counts
	took time.Duration
	err  error
}

// applyOnce makes one attempt at recs, in a slot of its own. With
// Config.JoinPartitions the batch waits as a joiner: the worker that gets
// a slot first, this one or another, applies it with every other batch
// waiting, in one transaction. ok is false when the worker was stopped
// before anything was applied.
func (w *partitionWorker) applyOnce(recs []decoded) (res counts, took time.Duration, ok bool, err error) {
	r := w.r
	if !r.cfg.JoinPartitions {
		select {
		case r.sem <- struct{}{}:
		case <-w.stopped:
			return res, 0, false, nil
		}
		res, took, err = w.lead(recs, nil)
		return res, took, true, err
	}
	j := &joiner{tp: w.tp, recs: recs, done: make(chan joined, 1)}
	r.joinMu.Lock()
	r.waiting = append(r.waiting, j)
	r.joinMu.Unlock()
	var out joined
	select {
	case r.sem <- struct{}{}:
		if r.unwait(j) {
			res, took, err = w.lead(recs, r.takeWaiting(r.cfg.MaxBatchRecords-len(recs)))
			return res, took, true, err
		}
		<-r.sem // another batch's transaction took this one along
		out = <-j.done
	case out = <-j.done:
	case <-w.stopped:
		if r.unwait(j) {
			return res, 0, false, nil
		}
		out = <-j.done // taken along already: its transaction decides
	}
	return out.res, out.took, true, out.err
}

// lead applies recs, and the batches of riders with them, in one
// transaction in the slot the worker holds, which it then gives back; it
// tells each rider the outcome.
func (w *partitionWorker) lead(recs []decoded, riders []*joiner) (counts, time.Duration, error) {
	r := w.r
	all := recs
	if len(riders) > 0 {
		batches := [][]decoded{recs}
		for _, j := range riders {
			batches = append(batches, j.recs)
		}
		all = slices.Concat(batches...)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(r.workCtx, r.cfg.BatchTimeout)
	res, err := r.applyBatch(ctx, all)
	cancel()
	<-r.sem
	took := time.Since(start)
	for _, j := range riders {
		j.done <- joined{res: res.of(j.tp), took: took, err: err}
	}
	return res.of(w.tp), took, err
}

// unwait takes j off the waiting list; false if a transaction took it.
func (r *Runner) unwait(j *joiner) bool {
	r.joinMu.Lock()
	defer r.joinMu.Unlock()
	for i, o := range r.waiting {
		if o == j {
			r.waiting = append(r.waiting[:i], r.waiting[i+1:]...)
			return true
		}
	}
	return false
}

// takeWaiting takes the waiting batches, oldest first, that fit in room
// records; those that do not fit keep waiting.
func (r *Runner) takeWaiting(room int) []*joiner {
	r.joinMu.Lock()
	defer r.joinMu.Unlock()
	var took []*joiner
	kept := r.waiting[:0]
	for _, j := range r.waiting {
		if len(j.recs) <= room {
			took = append(took, j)
			room -= len(j.recs)
		} else {
			kept = append(kept, j)
		}
	}
	clear(r.waiting[len(kept):])
	r.waiting = kept
	return took
}

func (r *Runner) observe(tp topicPartition, res counts, took time.Duration, lag int64) {
	g := r.cfg.Group
	if res.applied > 0 {
		r.m.events.WithLabelValues(g, tp.topic, OutcomeApplied).Add(float64(res.applied))
	}
	if res.duplicates > 0 {
		r.m.events.WithLabelValues(g, tp.topic, OutcomeDuplicate).Add(float64(res.duplicates))
	}
	if res.deadLettered > 0 {
		r.m.events.WithLabelValues(g, tp.topic, OutcomeDeadLettered).Add(float64(res.deadLettered))
	}
	r.m.applied.Add(int64(res.applied))
	r.m.dupes.Add(int64(res.duplicates))
	if res.ignored > 0 {
		r.m.events.WithLabelValues(g, tp.topic, OutcomeIgnored).Add(float64(res.ignored))
	}
	r.m.dead.Add(int64(res.deadLettered))
	r.m.ignored.Add(int64(res.ignored))
	r.m.batchesN.Add(1)
	r.m.latency.WithLabelValues(g).Observe(took.Seconds())
	r.m.lag.WithLabelValues(g, tp.topic, partLabel(tp.partition)).Set(float64(max(lag, 0)))
}
