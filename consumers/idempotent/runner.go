package idempotent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/infra/kit"
)

// Runner consumes its topics as one member of a consumer group and applies
// every event exactly once. Create it with NewRunner; Run it once.
type Runner struct {
	cfg     Config
	handles map[string]bool // Config.Types as a set; nil: every type
	m       *metrics
	cl      *kgo.Client // set by Run

	sem chan struct{} // bounds partitions applying a batch at once
	// waiting are the batches waiting for a slot, oldest first: with
	// Config.JoinPartitions the next batch to get one takes them along.
	joinMu  sync.Mutex
	waiting []*joiner
	budget  *budget // bounds the bytes of polled records held

	mu      sync.Mutex
	workers map[topicPartition]*partitionWorker

	// workCtx carries batches in flight. It outlives Run's ctx by up to
	// DrainTimeout so a shutdown finishes and commits what it started.
	workCtx    context.Context
	cancelWork context.CancelFunc

	ran bool
}

type topicPartition struct {
	topic     string
	partition int32
}

// NewRunner checks cfg and fills in defaults. It does not connect.
func NewRunner(cfg Config) (*Runner, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	var handles map[string]bool
	if len(cfg.Types) > 0 {
		handles = make(map[string]bool, len(cfg.Types))
		for _, t := range cfg.Types {
			handles[string(t)] = true
		}
	}
	m := newMetrics(cfg.Registerer)
	return &Runner{
		cfg:     cfg,
		handles: handles,
		m:       m,
		sem:     make(chan struct{}, cfg.MaxConcurrentPartitions),
		budget:  newBudget(cfg.MaxBufferedBytes, m.buffered.WithLabelValues(cfg.Group)),
		workers: make(map[topicPartition]*partitionWorker),
	}, nil
}

// Stats returns the runner's counters (also exported as metrics).
func (r *Runner) Stats() Stats {
	held, peak := r.budget.usage()
	return Stats{
		Applied: r.m.applied.Load(), Duplicates: r.m.dupes.Load(), DeadLettered: r.m.dead.Load(), Ignored: r.m.ignored.Load(),
		Retries: r.m.retried.Load(), Purged: r.m.purgedN.Load(), Batches: r.m.batchesN.Load(),
		BufferedBytes: held, PeakBufferedBytes: peak,
	}
}

// Run joins the group and applies events until ctx is done. Then it stops
// polling, lets in-flight batches finish (up to DrainTimeout), commits their
// offsets and leaves the group (a static member stays: see
// Config.InstanceID). It returns nil after a clean shutdown.
func (r *Runner) Run(ctx context.Context) error {
	if r.ran {
		return errors.New("idempotent: Runner.Run called twice")
	}
	r.ran = true
	log := r.cfg.Logger.With("group", r.cfg.Group)

	r.workCtx, r.cancelWork = context.WithCancel(context.WithoutCancel(ctx))
	defer r.cancelWork()

	opts := []kgo.Opt{
		kgo.ConsumerGroup(r.cfg.Group),
		kgo.ConsumeTopics(r.cfg.Topics...),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		// A new group starts at the beginning: for money-moving events,
		// skipping history is never the safe default.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// Only offsets the runner marked after a database commit are ever
		// committed, in the background every CommitInterval and at once on
		// revocation and shutdown.
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(r.cfg.CommitInterval),
		// Revocation waits until the poll loop has handed its records to
		// the partition workers, so no batch of a revoked partition is
		// dispatched after its worker has been stopped.
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsRevoked(r.revoked),
		kgo.OnPartitionsLost(r.lost),
		kgo.ProducerLinger(0),
		// A partition resumed after a pause is fetched with the next
		// fetch request, which waits up to FetchMaxWait when the other
		// partitions have nothing new: Apache Kafka's 500 ms, not
		// franz-go's 5 s.
		kgo.FetchMaxWait(500 * time.Millisecond),
		// What the client buffers beside the runner's budget.
		kgo.FetchMaxBytes(int32(min(r.cfg.MaxBufferedBytes/4, math.MaxInt32))),
	}
	if r.cfg.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(r.cfg.InstanceID))
	}
	opts = append(opts, kit.KafkaMetrics(r.cfg.Registerer, "consumer", prometheus.Labels{"group": r.cfg.Group}))
	cl, err := kit.NewKafkaClient(ctx, r.cfg.Kafka, r.cfg.Logger, append(opts, r.cfg.KafkaOpts...)...)
	if err != nil {
		return fmt.Errorf("consumer group %s: %w", r.cfg.Group, err)
	}
	r.cl = cl
	if err := r.ensureDLQTopic(ctx); err != nil {
		cl.Close()
		return err
	}

	var purge sync.WaitGroup
	if r.cfg.PurgeInterval > 0 {
		purge.Add(1)
		go func() { defer purge.Done(); r.purgeLoop(ctx) }()
	}

	log.Info("consumer started", "topics", r.cfg.Topics, "dlq", r.cfg.DLQTopic)
	r.poll(ctx)

	// Shutdown: stop every worker (each finishes the batch it is applying),
	// commit what they marked, then leave the group. Leaving revokes the
	// remaining (now idle) partitions through r.revoked, which finds no
	// workers and commits nothing new.
	drained := make(chan struct{})
	go func() { r.stopWorkers(nil); close(drained) }()
	select {
	case <-drained:
	case <-time.After(r.cfg.DrainTimeout):
		log.Warn("drain timeout: cancelling in-flight batches; they will be redelivered", "timeout", r.cfg.DrainTimeout)
		r.cancelWork()
		<-drained
	}
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err = cl.CommitMarkedOffsets(cctx)
	cancel()
	if err != nil {
		log.Warn("final offset commit failed; the last batches will be redelivered and skipped by dedupe", "err", err)
	}
	cl.Close()
	purge.Wait()
	log.Info("consumer stopped", "applied", r.m.applied.Load(), "duplicates", r.m.dupes.Load(), "dead_lettered", r.m.dead.Load(), "ignored", r.m.ignored.Load())
	return nil
}

// poll hands polled records to partition workers until ctx is done,
// polling only as many as MaxBufferedBytes has room for.
func (r *Runner) poll(ctx context.Context) {
	for {
		n, ok := r.budget.wait(ctx, 10*r.cfg.MaxBatchRecords)
		if !ok {
			return
		}
		fetches := r.cl.PollRecords(ctx, n)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			r.cl.AllowRebalance()
			return
		}
		fetches.EachError(func(topic string, p int32, err error) {
			r.cfg.Logger.Warn("fetch error", "group", r.cfg.Group, "topic", topic, "partition", p, "err", err)
		})
		var bytes int64
		var records int
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			records += len(p.Records)
			bytes += r.worker(p.Topic, p.Partition).push(p.Records, p.HighWatermark)
		})
		r.budget.observe(bytes, records)
		// Only now may a rebalance run: every polled record is queued at
		// its worker, which a revocation stops and waits for.
		r.cl.AllowRebalance()
	}
}

// partitionShare is the bytes one partition may hold before its fetching
// pauses: twice an even share of MaxBufferedBytes among the partitions
// the runner has. Partitions that keep up never reach it (pausing is not
// free: a resumed partition waits for the next fetch request); one that
// falls behind stops there, leaving the others the rest of the budget.
func (r *Runner) partitionShare() int64 {
	r.mu.Lock()
	n := len(r.workers)
	r.mu.Unlock()
	return min(r.cfg.MaxBufferedBytes, 2*r.cfg.MaxBufferedBytes/int64(max(n, 1)))
}

// worker returns the partition's worker, starting it on first use.
func (r *Runner) worker(topic string, partition int32) *partitionWorker {
	r.mu.Lock()
	defer r.mu.Unlock()
	tp := topicPartition{topic, partition}
	w, ok := r.workers[tp]
	if !ok {
		w = newPartitionWorker(r, tp)
		r.workers[tp] = w
		go w.run()
	}
	return w
}

// stopWorkers stops the workers of the given partitions (all when nil) and
// waits for each to finish its in-flight batch. Queued batches are dropped:
// their offsets were never marked, so the next owner gets them again.
func (r *Runner) stopWorkers(parts map[string][]int32) {
	r.mu.Lock()
	var stopping []*partitionWorker
	for tp, w := range r.workers {
		if parts != nil && !contains(parts[tp.topic], tp.partition) {
			continue
		}
		delete(r.workers, tp)
		stopping = append(stopping, w)
	}
	r.mu.Unlock()
	for _, w := range stopping {
		w.stop()
	}
	resume := map[string][]int32{}
	for _, w := range stopping {
		<-w.done
		if w.wasPaused() {
			resume[w.tp.topic] = append(resume[w.tp.topic], w.tp.partition)
		}
		r.m.lag.DeleteLabelValues(r.cfg.Group, w.tp.topic, partLabel(w.tp.partition))
	}
	if len(resume) > 0 {
		// Pauses outlive assignments; a partition that comes back must
		// not come back paused.
		r.cl.ResumeFetchPartitions(resume)
	}
}

// revoked runs when partitions move to another member (and at the end of
// every group session): in-flight batches finish and their offsets are
// committed before the partitions are released.
func (r *Runner) revoked(ctx context.Context, cl *kgo.Client, parts map[string][]int32) {
	r.stopWorkers(parts)
	if err := cl.CommitMarkedOffsets(ctx); err != nil {
		r.cfg.Logger.Warn("offset commit on revoke failed; the new owner re-reads the last batches and dedupe skips them",
			"group", r.cfg.Group, "partitions", parts, "err", err)
	}
}

// lost runs when the group session died (e.g. the member was kicked out):
// commits would fail, so workers are only stopped.
func (r *Runner) lost(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
	r.cfg.Logger.Warn("partitions lost", "group", r.cfg.Group, "partitions", parts)
	r.stopWorkers(parts)
}

// ensureDLQTopic creates the dead-letter topic with the broker's default
// partitions and replication when it does not exist.
func (r *Runner) ensureDLQTopic(ctx context.Context) error {
	adm := kadm.NewClient(r.cl)
	resp, err := adm.CreateTopic(ctx, -1, -1, nil, r.cfg.DLQTopic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create dead-letter topic %s: %w", r.cfg.DLQTopic, err)
	}
	return nil
}

func contains(ps []int32, p int32) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}
