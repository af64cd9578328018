package idempotent

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
)

// Defaults of the tuning knobs of Config.
const (
	DefaultMaxConcurrentPartitions = 8
	DefaultMaxBatchRecords         = 1000
	DefaultQueuedBatches           = 4
	DefaultMaxBufferedBytes        = 32 << 20
	DefaultRetryBackoffMin         = 100 * time.Millisecond
	DefaultRetryBackoffMax         = 10 * time.Second
	DefaultBatchTimeout            = 30 * time.Second
	DefaultCommitInterval          = time.Second
	DefaultDrainTimeout            = 30 * time.Second
	DefaultRetention               = 30 * 24 * time.Hour
	DefaultPurgeInterval           = time.Hour
	DefaultPurgeBatchSize          = 5000
)

// DLQSuffix is appended to the group name to form its dead-letter topic.
const DLQSuffix = ".dlq"

// Config configures a Runner. Group, Topics, Pool, Kafka and one of Handler
// or BatchHandler are required; every other field has the default stated
// beside it.
type Config struct {
	Group   string
	Topics  []string
	Pool    *pgxpool.Pool
	Kafka   kit.KafkaConfig
	Handler Handler
	// BatchHandler replaces Handler for set-based handlers: one call per
	// batch with all its new events (see BatchHandler).
	BatchHandler BatchHandler
	Logger       *slog.Logger          // default: discard
	Registerer   prometheus.Registerer // optional; metrics are kept private when nil

	// Catalog validates every record; default schemas.MustDefault().
	Catalog *schemas.Catalog

	// Types, when set, are the event types the handler acts on. A record
	// of another type (consumers share topics with events they do not
	// care about) is acknowledged without a dedupe row, validation or a
	// handler call: an event that changes nothing cannot change anything
	// twice. Its offset is committed like any other. Empty: every type is
	// handled, recorded and validated.
	Types []contract.Type

	// Outbox routes the events handlers emit (its TopicPrefix keeps tests
	// and side-by-side runs apart); the zero value uses catalog topics.
	// Emitted events are written to the outbox table of Pool's database in
	// the handler's transaction.
	Outbox outbox.Writer

	// MaxConcurrentPartitions bounds how many partitions apply a batch at
	// the same time, i.e. how many pool connections the runner holds.
	// Default DefaultMaxConcurrentPartitions, capped at the pool's MaxConns.
	MaxConcurrentPartitions int
	// JoinPartitions lets batches that wait for one of those slots ride
	// in the transaction of the next batch to get one: it applies them
	// all (up to MaxBatchRecords records) and commits once, and each
	// partition's offsets move only after that commit. Each partition's
	// records stay in offset order, and a partition still has one batch
	// in flight at a time; the BatchHandler then sees events of several
	// partitions in one call. It pays where slots are few and partitions
	// many: one slot over two dozen partitions applies a batch of one or
	// two events per transaction, and the partitions queue behind each
	// other's commits.
	JoinPartitions bool
	// MaxBatchRecords caps the records applied in one transaction.
	// Default DefaultMaxBatchRecords.
	MaxBatchRecords int
	// QueuedBatches is how many polled batches may wait per partition before
	// the runner pauses fetching that partition. Default DefaultQueuedBatches.
	QueuedBatches int
	// MaxBufferedBytes bounds the memory of the records the runner polled
	// and has not finished applying: their keys, values and headers plus a
	// fixed allowance per record for the decoded event (see recordBytes).
	// When it is reached the runner stops polling until a batch is done;
	// each assigned partition pauses at its even share, so a stuck
	// partition leaves the others their room. What franz-go has fetched
	// and not yet handed over comes on top: the runner caps a fetch
	// response at a quarter of MaxBufferedBytes (kgo.FetchMaxBytes; one
	// response is buffered per broker, decompressed), which KafkaOpts may
	// override. Default DefaultMaxBufferedBytes.
	MaxBufferedBytes int64
	// RetryBackoffMin and RetryBackoffMax bound the exponential backoff
	// (with jitter) between retries of a batch that failed transiently.
	// Defaults DefaultRetryBackoffMin and DefaultRetryBackoffMax.
	RetryBackoffMin, RetryBackoffMax time.Duration
	// BatchTimeout bounds one attempt at a batch (transaction, handlers,
	// DLQ produce); an attempt that exceeds it is retried. Default
	// DefaultBatchTimeout.
	BatchTimeout time.Duration
	// CommitInterval is how often marked offsets are committed to Kafka
	// in the background; revocation and shutdown commit at once. Default
	// DefaultCommitInterval.
	CommitInterval time.Duration
	// DrainTimeout bounds how long Run waits for in-flight batches when ctx
	// is done before it cancels them. Default DefaultDrainTimeout.
	DrainTimeout time.Duration
	// Retention is how long processed_events rows are kept. It must exceed
	// the topics' retention plus the longest replay you intend, or a replay
	// re-applies events whose dedupe rows are gone. Default DefaultRetention
	// (30 days; Kafka's default topic retention is 7).
	Retention time.Duration
	// PurgeInterval is how often expired processed_events rows are purged;
	// negative disables the purge. Default DefaultPurgeInterval.
	PurgeInterval time.Duration
	// PurgeBatchSize is how many rows one purge statement deletes, so the
	// purge never holds long locks. Default DefaultPurgeBatchSize.
	PurgeBatchSize int
	// DLQTopic overrides the dead-letter topic; default Group + DLQSuffix.
	// The runner creates it (broker defaults) when missing.
	DLQTopic string

	// InstanceID makes the runner a static member of its group
	// (group.instance.id): a process killed and restarted with the same id
	// gets its partitions back at once instead of after the session timeout,
	// and a member paused for less than the session timeout causes no
	// rebalance at all. It must be unique among the live members and stable
	// across restarts of one process (a host name, a pod ordinal); a second
	// live process with the same id is fenced out. A static member does not
	// leave the group when it stops, so its partitions wait for it up to the
	// session timeout: choose that timeout longer than a restart takes.
	// Empty: a dynamic member that leaves on shutdown.
	InstanceID string

	// AfterDBCommit, if set, is called after a batch's transaction commits
	// and before its offsets are marked for commit. A process that dies here
	// gets the batch redelivered, which dedupe turns into no-ops; tests use
	// the hook to die exactly here.
	AfterDBCommit func(topic string, partition int32, lastOffset int64)
	// KafkaOpts are extra franz-go options appended last (session timeout,
	// fetch sizes, client id).
	KafkaOpts []kgo.Opt
}

func (c *Config) setDefaults() error {
	var errs []error
	if strings.TrimSpace(c.Group) == "" {
		errs = append(errs, errors.New("Group is required"))
	}
	if len(c.Topics) == 0 {
		errs = append(errs, errors.New("Topics is required"))
	}
	if c.Pool == nil {
		errs = append(errs, errors.New("Pool is required"))
	}
	switch {
	case c.Handler == nil && c.BatchHandler == nil:
		errs = append(errs, errors.New("Handler or BatchHandler is required"))
	case c.Handler != nil && c.BatchHandler != nil:
		errs = append(errs, errors.New("set Handler or BatchHandler, not both"))
	}
	if len(c.Kafka.Brokers) == 0 {
		errs = append(errs, errors.New("Kafka.Brokers is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("idempotent config: %w", err)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	if c.Catalog == nil {
		c.Catalog = schemas.MustDefault()
	}
	if c.MaxConcurrentPartitions <= 0 {
		c.MaxConcurrentPartitions = DefaultMaxConcurrentPartitions
	}
	if max := int(c.Pool.Config().MaxConns); c.MaxConcurrentPartitions > max {
		c.MaxConcurrentPartitions = max
	}
	setInt(&c.MaxBatchRecords, DefaultMaxBatchRecords)
	setInt(&c.QueuedBatches, DefaultQueuedBatches)
	if c.MaxBufferedBytes <= 0 {
		c.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	setInt(&c.PurgeBatchSize, DefaultPurgeBatchSize)
	setDur(&c.RetryBackoffMin, DefaultRetryBackoffMin)
	setDur(&c.RetryBackoffMax, DefaultRetryBackoffMax)
	setDur(&c.BatchTimeout, DefaultBatchTimeout)
	setDur(&c.CommitInterval, DefaultCommitInterval)
	setDur(&c.DrainTimeout, DefaultDrainTimeout)
	setDur(&c.Retention, DefaultRetention)
	if c.PurgeInterval == 0 {
		c.PurgeInterval = DefaultPurgeInterval
	}
	if c.RetryBackoffMax < c.RetryBackoffMin {
		c.RetryBackoffMax = c.RetryBackoffMin
	}
	if c.DLQTopic == "" {
		c.DLQTopic = c.Group + DLQSuffix
	}
	return nil
}

func setInt(v *int, def int) {
	if *v <= 0 {
		*v = def
	}
}

func setDur(v *time.Duration, def time.Duration) {
	if *v <= 0 {
		*v = def
	}
}
