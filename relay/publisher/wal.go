package publisher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/infra/backoff"
	"github.com/concordhq/concord/infra/kit"
)

// Defaults of the WALConfig fields left zero.
const (
	DefaultSlot           = "concord_outbox"
	DefaultPublication    = "concord_outbox"
	DefaultStatusInterval = 100 * time.Millisecond
	DefaultStartRetry     = 500 * time.Millisecond
)

// DefaultWALLinger is relay --mode wal's producer linger (Config.Linger,
// whose zero still sends at once). The stream hands over one transaction
// at a time, so at a steady rate sending at once makes a produce request of
// one or two records, and on a small machine the CPU of those requests,
// the relay's and the broker's, becomes the tail. A millisecond lets the
// rows of neighbouring transactions share a request, for a millisecond
// more on the median (relay/README "Linger"). Poll mode keeps 0: it
// produces a whole batch at once and waits for the last record's ack.
const DefaultWALLinger = time.Millisecond

// DefaultLinger is the producer linger of relay --mode (poll or wal) when
// none is given: DefaultWALLinger in WAL mode, 0 in poll mode.
func DefaultLinger(mode string) time.Duration {
	if mode == "wal" {
		return DefaultWALLinger
	}
	return 0
}

// WALConfig configures a WALRelay: the poll relay's Config (Pool, Kafka,
// MaxAttempts, backoff, producer settings, Retention, OnAck…; Shards,
// Workers and BatchSize do not apply) and the replication names.
type WALConfig struct {
	Config
	// Slot is the logical replication slot (pgoutput) the relay streams
	// from; created at first start. One instance streams from a slot at a
	// time. Default concord_outbox.
	Slot string
	// Publication is the publication of the outbox table's inserts; created
	// at first start. Default concord_outbox.
	Publication string
	// StatusInterval is how often the acknowledged rows are deleted and the
	// confirmed LSN sent to the server. Default 100ms.
	StatusInterval time.Duration
	// StartRetry is how long a standby instance waits before trying
	// START_REPLICATION again while another instance holds the slot.
	// Default 500ms.
	StartRetry time.Duration
}

// WALRelay publishes the outbox from PostgreSQL's logical replication
// stream: the inserts of the outbox table, decoded by pgoutput, in commit
// order. Services keep appending with outbox.Append; nothing changes on
// their side. Create it with NewWAL; Run it once.
//
// A row Kafka acknowledged is deleted, not marked published: the slot's
// confirmed LSN is the record of what was published, and Kafka holds the
// events. Marking was an UPDATE per row, a second copy of every row in the
// heap, its indexes and the WAL the walsender decodes again; a delete
// writes a few bytes. The table holds what is not published yet: rows in
// flight, parked rows and the rows waiting behind them. Retention applies to
// rows marked by the poll mode only.
type WALRelay struct {
	*Relay
	w        WALConfig
	lag      prometheus.Gauge
	received prometheus.Counter
	// streamDelay is commit to read: the database's share of a WAL
	// relay's commit-to-ack, decoding and sending included.
	streamDelay prometheus.Histogram
	streaming   atomic.Bool
	// limitTried is when each topic's max.message.bytes was last looked
	// up; used by the streaming goroutine only.
	limitTried map[string]time.Time
}

// Ready reports whether this instance streams from the slot and Kafka
// answers. A standby waiting for the slot is alive but not ready.
func (w *WALRelay) Ready(ctx context.Context) error {
	if err := w.cfg.Pool.Ping(ctx); err != nil {
		return fmt.Errorf("database: %w", err)
	}
	if !w.streaming.Load() {
		return fmt.Errorf("replication slot %s: not streaming (another instance holds it, or the server is away)", w.w.Slot)
	}
	w.mu.Lock()
	cl := w.client
	w.mu.Unlock()
	if cl == nil {
		return errors.New("kafka: not connected yet")
	}
	if err := cl.Ping(ctx); err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	return nil
}

// Streaming says whether this instance holds the slot now.
func (w *WALRelay) Streaming() bool { return w.streaming.Load() }

// NewWAL checks cfg and fills its defaults. It connects to nothing yet.
func NewWAL(cfg WALConfig) (*WALRelay, error) {
	if cfg.Slot == "" {
		cfg.Slot = DefaultSlot
	}
	if cfg.Publication == "" {
		cfg.Publication = DefaultPublication
	}
	if !identifier(cfg.Slot) || !identifier(cfg.Publication) {
		return nil, fmt.Errorf("relay: slot %q and publication %q must be lower-case letters, digits and _", cfg.Slot, cfg.Publication)
	}
	if cfg.StatusInterval <= 0 {
		cfg.StatusInterval = DefaultStatusInterval
	}
	if cfg.StartRetry <= 0 {
		cfg.StartRetry = DefaultStartRetry
	}
	reg := cfg.Registerer
	cfg.Config.Registerer = nil
	r, err := New(cfg.Config)
	if err != nil {
		return nil, err
	}
	w := &WALRelay{Relay: r, w: cfg, limitTried: map[string]time.Time{}}
	w.received = prometheus.NewCounter(prometheus.CounterOpts{Name: "concord_relay_wal_received_rows_total",
		Help: "Outbox inserts this instance decoded from the replication stream (re-sent ones after a restart included)."})
	w.lag = prometheus.NewGauge(prometheus.GaugeOpts{Name: "concord_relay_wal_slot_lag_bytes",
		Help: "WAL the server keeps for the relay's slot: current WAL position minus the slot's confirmed flush LSN."})
	w.streamDelay = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "concord_relay_wal_commit_to_read_seconds",
		Help:    "From a transaction's commit (the database server's clock) to the relay reading it from the replication stream: the walsender's share of commit-to-ack.",
		Buckets: []float64{.001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}})
	if reg != nil {
		r.m = newMetrics(reg)
		reg.MustRegister(w.lag, w.received, w.streamDelay)
	}
	return w, nil
}

// identifier says whether s can be used unquoted as a slot or publication
// name (slot names allow only these characters anyway).
func identifier(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// Run streams and publishes until ctx is done, then waits for the acks of
// the records in flight, deletes them, confirms their LSN and returns.
// Database, replication and broker outages are logged and retried, never
// returned.
func (w *WALRelay) Run(ctx context.Context) error {
	cl := w.cfg.Client
	if cl == nil {
		var err error
		cl, err = kit.NewKafkaClient(ctx, w.cfg.Kafka, w.log, ProducerOpts(w.cfg, w.limits.get)...)
		if err != nil {
			return err
		}
		defer cl.Close()
	}
	w.mu.Lock()
	w.client, w.adm = cl, kadm.NewClient(cl)
	w.mu.Unlock()

	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); w.lagLoop(ctx) }()
	go func() { defer wg.Done(); w.walCleanupLoop(ctx) }()
	go func() { defer wg.Done(); w.metricsLoop(ctx) }()
	defer wg.Wait()

	w.log.Info("relay running in WAL mode", "slot", w.w.Slot, "publication", w.w.Publication, "linger", w.cfg.Linger.String())
	retry := backoff.Loop{First: w.cfg.BackoffMin, Max: w.cfg.BackoffMax}
	for ctx.Err() == nil {
		began := time.Now()
		started, err := w.session(ctx)
		if ctx.Err() != nil {
			break
		}
		var wait time.Duration
		if started {
			if time.Since(began) > time.Minute {
				retry.Succeeded() // a long healthy session: start the backoff over
			}
			wait = retry.Failed()
		} else {
			wait = w.w.StartRetry // another instance holds the slot, or the server is away
		}
		w.log.Warn("WAL relay session ended; starting again", "err", err, "retry_in", wait)
		w.sleep(ctx, -1, wait)
	}
	w.log.Info("relay stopped: records in flight acknowledged, deleted and confirmed")
	return nil
}

// EnsurePublication creates the publication of the outbox table's inserts
// if it does not exist. Only inserts: the relay's deletes, its failure counts
// and the operator's updates are not streamed.
//
// It publishes only the columns a record is made of (decodeRow's), so the
// walsender converts and sends fewer per row; a server before PostgreSQL 15,
// which has no column lists, gets the whole table.
func (w *WALRelay) EnsurePublication(ctx context.Context) error {
	_, err := w.cfg.Pool.Exec(ctx, "create publication "+w.w.Publication+" for table outbox ("+publishedColumns+") with (publish = 'insert')")
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42601" { // syntax_error: no column lists before PostgreSQL 15
		_, err = w.cfg.Pool.Exec(ctx, "create publication "+w.w.Publication+" for table outbox with (publish = 'insert')")
	}
	if errors.As(err, &pgErr) && pgErr.Code == "42710" { // duplicate_object
		return nil
	}
	if err != nil {
		return fmt.Errorf("create publication %s: %w", w.w.Publication, err)
	}
	return nil
}

// DropSlot drops the relay's slot (tests, decommissioning): the server
// stops keeping WAL for it. It fails while an instance streams from it.
func (w *WALRelay) DropSlot(ctx context.Context) error {
	if _, err := w.cfg.Pool.Exec(ctx, "select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = $1", w.w.Slot); err != nil {
		return err
	}
	_, err := w.cfg.Pool.Exec(ctx, "delete from outbox_wal_slot where slot = $1", w.w.Slot)
	return err
}

// publishedColumns are the outbox columns the stream carries: what decodeRow
// reads.
const publishedColumns = "id, event_id, partition_key, topic, event_type, event_version, payload, headers, created_at, attempts, published_at, skipped_at"

// deletePublished removes rows Kafka acknowledged.
const deletePublished = `delete from outbox where id = any($1::bigint[])`

// walTxn is one committed transaction of the stream: the slot may confirm
// its end LSN once every row it produced is acknowledged.
type walTxn struct {
	committed time.Time // its commit time, from the server (Ack.Committed)
	read      time.Time // when its first message arrived (Ack.Read)
	end       pglogrepl.LSN
	ids       []int64 // rows produced
	pending   int     // records without an answer yet
	err       error   // first failure of its records
	failed    row     // the row of err
	sealed    bool    // its commit was received
}

// walSession is the state of one START_REPLICATION.
type walSession struct {
	mu        sync.Mutex
	txns      []*walTxn // in commit order
	cur       *walTxn
	relations map[uint32]*pglogrepl.RelationMessage
	// blocked are keys with a parked (or failing) row: their later rows are
	// left pending in the table, and lastSeen bounds the ids the sweep may
	// publish for them (rows beyond it come later in the stream).
	blocked  map[string]int64
	cols     []tupleColumn // the last insert's columns, reused
	confirm  pglogrepl.LSN // acknowledged, deleted: safe to confirm
	received pglogrepl.LSN // last server WAL end seen with nothing open
	types    *pgtype.Map
}

// session connects for replication, makes sure the publication and slot
// exist, streams until ctx is done or something fails, and reports whether
// START_REPLICATION succeeded (false: the slot is busy or the server away).
func (w *WALRelay) session(ctx context.Context) (bool, error) {
	if err := w.EnsurePublication(ctx); err != nil {
		return false, err
	}
	pc := w.cfg.Pool.Config().ConnConfig.Config.Copy()
	if pc.RuntimeParams == nil {
		pc.RuntimeParams = map[string]string{}
	}
	pc.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(ctx, pc)
	if err != nil {
		return false, fmt.Errorf("replication connection: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	_, err = pglogrepl.CreateReplicationSlot(ctx, conn, w.w.Slot, "pgoutput", pglogrepl.CreateReplicationSlotOptions{})
	var pgErr *pgconn.PgError
	// Every row committed before the slot's consistent point is visible
	// now, so its id is at most max(id). A new slot records (or resets)
	// the rows to drain; an existing one records them only if that was
	// never done (a relay that died right after creating it), which
	// drains more than needed, never less.
	record := `insert into outbox_wal_slot (slot, drain_upto) values ($1, (select coalesce(max(id), 0) from outbox))
		on conflict (slot) do nothing`
	switch {
	case err == nil:
		w.log.Info("replication slot created", "slot", w.w.Slot)
		record = `insert into outbox_wal_slot (slot, drain_upto) values ($1, (select coalesce(max(id), 0) from outbox))
			on conflict (slot) do update set drain_upto = excluded.drain_upto, drained_at = null`
	case errors.As(err, &pgErr) && pgErr.Code == "42710": // exists already
	default:
		return false, fmt.Errorf("create replication slot %s: %w", w.w.Slot, err)
	}
	if _, err := w.cfg.Pool.Exec(ctx, record, w.w.Slot); err != nil {
		return false, fmt.Errorf("record the drain of slot %s: %w", w.w.Slot, err)
	}

	s := &walSession{relations: map[uint32]*pglogrepl.RelationMessage{}, blocked: map[string]int64{}, types: pgtype.NewMap()}
	if err := w.loadBlocked(ctx, s); err != nil {
		return false, err
	}
	err = pglogrepl.StartReplication(ctx, conn, w.w.Slot, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names '" + w.w.Publication + "'"}})
	if err != nil {
		return false, fmt.Errorf("start replication on slot %s: %w", w.w.Slot, err)
	}
	w.log.Info("streaming from replication slot", "slot", w.w.Slot)
	w.streaming.Store(true)
	defer w.streaming.Store(false)
	// Rows committed before the slot existed are not in its stream: they are
	// published from the table, before the stream's first row so per-key
	// order holds (rows also in the stream go twice), until that is done
	// once, whichever start of the relay gets there.
	var upTo int64
	err = w.cfg.Pool.QueryRow(ctx, "select drain_upto from outbox_wal_slot where slot = $1 and drained_at is null", w.w.Slot).Scan(&upTo)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return true, fmt.Errorf("read the drain of slot %s: %w", w.w.Slot, err)
	default:
		if err := w.drainPending(ctx, s, upTo); err != nil {
			return true, err
		}
		if _, err := w.cfg.Pool.Exec(ctx, "update outbox_wal_slot set drained_at = now() where slot = $1", w.w.Slot); err != nil {
			return true, fmt.Errorf("record the drain of slot %s: %w", w.w.Slot, err)
		}
		w.log.Info("rows pending before the slot existed published", "slot", w.w.Slot, "up_to_id", upTo)
	}
	return true, w.stream(ctx, conn, s)
}

type walMsg struct {
	msg pgproto3.BackendMessage
	err error
}

// stream reads the replication stream on its own goroutine (a read must
// never be interrupted by a deadline: pgconn would cancel the walsender's
// query) and, here, produces each insert, settles finished transactions and
// sends the confirmed LSN every StatusInterval.
func (w *WALRelay) stream(ctx context.Context, conn *pgconn.PgConn, s *walSession) error {
	msgs := make(chan walMsg, 256)
	recvCtx, stopRecv := context.WithCancel(context.WithoutCancel(ctx))
	recvDone := make(chan struct{})
	defer func() {
		// Closing the socket ends the blocked read; the caller's Close of
		// conn must not run while the reader still uses it.
		stopRecv()
		_ = conn.Conn().Close()
		<-recvDone
	}()
	go func() {
		defer close(recvDone)
		for {
			m, err := conn.ReceiveMessage(recvCtx)
			if cd, ok := m.(*pgproto3.CopyData); ok {
				// The message's buffer is reused by the next receive.
				m = &pgproto3.CopyData{Data: append([]byte(nil), cd.Data...)}
			}
			select {
			case msgs <- walMsg{m, err}:
			case <-recvCtx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	tick := time.NewTicker(w.w.StatusInterval)
	defer tick.Stop()
	sweep := time.NewTicker(w.cfg.PollInterval)
	defer sweep.Stop()
	var sent pglogrepl.LSN
	status := func(force bool) error {
		s.mu.Lock()
		lsn := s.confirm
		s.mu.Unlock()
		if lsn == sent && !force {
			return nil
		}
		if err := pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: lsn}); err != nil {
			return fmt.Errorf("send standby status: %w", err)
		}
		sent = lsn
		return nil
	}
	// Deleting acknowledged rows takes a round trip: it runs on its own
	// goroutine so decoding and producing never wait for it.
	settleErr := make(chan error, 1)
	settleCtx, stopSettle := context.WithCancel(context.WithoutCancel(ctx))
	settleDone := make(chan struct{})
	go func() {
		defer close(settleDone)
		t := time.NewTicker(w.w.StatusInterval)
		defer t.Stop()
		for {
			select {
			case <-settleCtx.Done():
				return
			case <-t.C:
			}
			if err := w.settleWAL(settleCtx, s); err != nil {
				settleErr <- err
				return
			}
		}
	}()
	stopSettling := func() { stopSettle(); <-settleDone }
	defer stopSettling()
	for {
		select {
		case <-ctx.Done():
			// Drain: wait for the records in flight, delete, confirm.
			stopSettling()
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.DeliveryTimeout)
			_ = w.client.Flush(fctx)
			cancel()
			err := w.settleWAL(context.WithoutCancel(ctx), s)
			return errors.Join(err, status(true))
		case err := <-settleErr:
			return err
		case m := <-msgs:
			if m.err != nil {
				return fmt.Errorf("replication stream: %w", m.err)
			}
			if err := w.handle(ctx, conn, s, m.msg, status); err != nil {
				return err
			}
		case <-tick.C:
			if err := status(false); err != nil {
				return err
			}
		case <-sweep.C:
			if err := w.sweepBlocked(ctx, s); err != nil {
				return err
			}
		}
	}
}

func (w *WALRelay) handle(ctx context.Context, conn *pgconn.PgConn, s *walSession, msg pgproto3.BackendMessage, status func(bool) error) error {
	switch msg := msg.(type) {
	case *pgproto3.ErrorResponse:
		return fmt.Errorf("replication stream: %s", msg.Message)
	case *pgproto3.CopyData:
		if len(msg.Data) == 0 {
			return nil
		}
		switch msg.Data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(msg.Data[1:])
			if err != nil {
				return fmt.Errorf("parse keepalive: %w", err)
			}
			w.idleAdvance(s, ka.ServerWALEnd)
			if ka.ReplyRequested {
				return status(true)
			}
		case pglogrepl.XLogDataByteID:
			xld, err := pglogrepl.ParseXLogData(msg.Data[1:])
			if err != nil {
				return fmt.Errorf("parse xlog data: %w", err)
			}
			return w.decode(ctx, s, xld)
		}
	}
	return nil
}

// idleAdvance lets the slot's confirmed LSN follow the server's WAL end
// while nothing is open or in flight, so an idle outbox on a busy server
// does not pin WAL.
func (w *WALRelay) idleAdvance(s *walSession, end pglogrepl.LSN) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil && len(s.txns) == 0 && end > s.confirm {
		s.confirm = end
	}
}

func (w *WALRelay) decode(ctx context.Context, s *walSession, xld pglogrepl.XLogData) error {
	if len(xld.WALData) > 0 && xld.WALData[0] == byte(pglogrepl.MessageTypeInsert) {
		relID, cols, err := parseInsert(xld.WALData, s.cols)
		s.cols = cols
		if err != nil {
			return fmt.Errorf("decode pgoutput: %w", err)
		}
		rel, ok := s.relations[relID]
		if !ok {
			return fmt.Errorf("insert into unknown relation %d", relID)
		}
		rw, err := decodeRow(s.types, rel, cols)
		if err != nil {
			return err
		}
		w.received.Inc()
		return w.produceWAL(ctx, s, rw)
	}
	lm, err := pglogrepl.Parse(xld.WALData)
	if err != nil {
		return fmt.Errorf("decode pgoutput: %w", err)
	}
	switch m := lm.(type) {
	case *pglogrepl.RelationMessage:
		s.relations[m.RelationID] = m
	case *pglogrepl.BeginMessage:
		read := time.Now()
		w.streamDelay.Observe(read.Sub(m.CommitTime).Seconds())
		s.mu.Lock()
		s.cur = &walTxn{committed: m.CommitTime, read: read}
		s.mu.Unlock()
	case *pglogrepl.CommitMessage:
		s.mu.Lock()
		if t := s.cur; t != nil {
			t.end, t.sealed = m.TransactionEndLSN, true
			s.txns = append(s.txns, t)
			s.cur = nil
		}
		s.mu.Unlock()
	}
	return nil
}

// decodeRow maps an outbox insert (pgoutput text format) to the row the
// poll relay reads, so both modes produce the same records. Only the
// columns a record needs are converted; the payload keeps the message's
// bytes.
func decodeRow(types *pgtype.Map, rel *pglogrepl.RelationMessage, cols []tupleColumn) (row, error) {
	var rw row
	if len(cols) == 0 {
		return rw, errors.New("outbox insert without a tuple")
	}
	var published, skipped bool
	for i, col := range cols {
		if i >= len(rel.Columns) || col.kind != pglogrepl.TupleDataTypeText {
			continue
		}
		var err error
		switch rel.Columns[i].Name {
		case "id":
			rw.id, err = strconv.ParseInt(string(col.data), 10, 64)
		case "event_id":
			rw.eventID = string(col.data)
		case "partition_key":
			rw.key = string(col.data)
		case "topic":
			rw.topic = string(col.data)
		case "event_type":
			rw.eventType = string(col.data)
		case "event_version":
			rw.version, err = strconv.Atoi(string(col.data))
		case "payload":
			rw.payload = col.data
		case "headers":
			if string(col.data) != "{}" { // most rows carry none
				err = json.Unmarshal(col.data, &rw.headers)
			}
		case "created_at":
			err = types.Scan(pgtype.TimestamptzOID, pgtype.TextFormatCode, col.data, &rw.createdAt)
		case "attempts":
			rw.attempts, err = strconv.Atoi(string(col.data))
		case "published_at":
			published = true
		case "skipped_at":
			skipped = true
		}
		if err != nil {
			return rw, fmt.Errorf("decode outbox column %s: %w", rel.Columns[i].Name, err)
		}
	}
	if rw.id == 0 || rw.topic == "" {
		return rw, errors.New("outbox insert without id or topic")
	}
	if published || skipped {
		rw.topic = "" // inserted as done: nothing to publish
	}
	return rw, nil
}

// produceWAL hands one streamed row to the producer; its answer settles it
// in its transaction.
func (w *WALRelay) produceWAL(ctx context.Context, s *walSession, rw row) error {
	s.mu.Lock()
	t := s.cur
	if rw.topic == "" {
		s.mu.Unlock()
		return nil
	}
	if _, ok := s.blocked[rw.key]; ok {
		s.blocked[rw.key] = rw.id // left pending; the sweep publishes it once the key flows
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	rec := w.record(rw)
	if err := w.tooLarge(ctx, rec); err != nil {
		// Refused before producing, so no later row of its key can overtake it.
		return w.fail(ctx, s, rw, err)
	}
	s.mu.Lock()
	t.pending++
	t.ids = append(t.ids, rw.id)
	s.mu.Unlock()
	w.client.Produce(ctx, rec, func(_ *kgo.Record, err error) {
		acked := time.Now()
		s.mu.Lock()
		t.pending--
		if err != nil && t.err == nil {
			t.failed = rw
			t.err = fmt.Errorf("produce event %s (%s) to topic %s, key %s: %w", rw.eventID, rw.eventType, rw.topic, rw.key, err)
		}
		s.mu.Unlock()
		if err != nil {
			w.m.failures.WithLabelValues(rw.topic, failureKind(err)).Inc()
			return
		}
		w.m.published.WithLabelValues(rw.topic).Inc()
		w.m.latency.Observe(acked.Sub(rw.createdAt).Seconds())
		if w.cfg.OnAck != nil {
			w.cfg.OnAck(Ack{EventID: rw.eventID, Inserted: rw.createdAt, Committed: t.committed, Read: t.read, Acked: acked})
		}
	})
	return nil
}

func failureKind(err error) string {
	if Refused(err) {
		return "refused"
	}
	return "transient"
}

func (w *WALRelay) tooLarge(ctx context.Context, rec *kgo.Record) error {
	if _, ok := w.limits.get(rec.Topic); !ok && time.Since(w.limitTried[rec.Topic]) > time.Minute {
		// Looked up at most once a minute per topic: with the broker away a
		// lookup per row would stall the stream.
		w.limitTried[rec.Topic] = time.Now()
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		w.limits.load(lctx, w.adm, []string{rec.Topic})
		cancel()
	}
	limit := int32(w.cfg.MaxMessageBytes)
	if l, ok := w.limits.get(rec.Topic); ok && l < limit {
		limit = l
	}
	if size := recordSize(rec); size > int(limit) {
		return errTooLarge(size, limit, rec.Topic)
	}
	return nil
}

// fail records a refused row's attempt in the table. Once its attempts run
// out it is parked and its key blocked (later rows stay pending until an
// operator retries or skips it); before that the session ends and streams
// again from the confirmed LSN after a backoff, as the poll relay would
// try the row again.
func (w *WALRelay) fail(ctx context.Context, s *walSession, rw row, cause error) error {
	var attempts int
	err := w.cfg.Pool.QueryRow(ctx, `update outbox set attempts = attempts + 1, last_error = $2
		where id = $1 returning attempts`, rw.id, cause.Error()).Scan(&attempts)
	if err != nil {
		return fmt.Errorf("record the failure of outbox row %d: %w", rw.id, err)
	}
	w.m.failures.WithLabelValues(rw.topic, failureKind(cause)).Inc()
	park := Park(attempts, w.cfg.MaxAttempts, Refused(cause))
	rw.attempts = attempts - 1
	w.logFailure(rw, cause, park)
	if !park {
		return fmt.Errorf("outbox row %d: %w", rw.id, cause)
	}
	if _, err := w.cfg.Pool.Exec(ctx, "update outbox set parked_at = now() where id = $1", rw.id); err != nil {
		return fmt.Errorf("park outbox row %d: %w", rw.id, err)
	}
	w.m.parkedTotal.Inc()
	s.mu.Lock()
	s.blocked[rw.key] = rw.id
	s.mu.Unlock()
	return nil
}

// settleWAL takes the transactions at the head of the stream whose records
// all have an answer, deletes their rows and moves the LSN the slot may
// confirm past them. A failed record ends the session: the stream
// starts again from the confirmed LSN, so nothing after it is skipped.
func (w *WALRelay) settleWAL(ctx context.Context, s *walSession) error {
	s.mu.Lock()
	var ids []int64
	var end pglogrepl.LSN
	n := 0
	var ferr error
	var frow row
	for _, t := range s.txns {
		if !t.sealed || t.pending > 0 {
			break
		}
		if t.err != nil {
			ferr, frow = t.err, t.failed
			break
		}
		ids = append(ids, t.ids...)
		end = t.end
		n++
	}
	s.mu.Unlock()
	if n > 0 {
		if len(ids) > 0 {
			if _, err := w.cfg.Pool.Exec(ctx, deletePublished, ids); err != nil {
				return fmt.Errorf("delete %d published rows: %w", len(ids), err)
			}
		}
		s.mu.Lock()
		s.txns = s.txns[n:]
		if end > s.confirm {
			s.confirm = end
		}
		s.mu.Unlock()
	}
	if ferr != nil && Refused(ferr) {
		// Count the refusal against the row (and park it when its attempts
		// ran out) before streaming again from the confirmed LSN.
		if err := w.fail(ctx, s, frow, ferr); err != nil {
			return err
		}
	}
	return ferr
}

// selectBlockedKeys reads the keys that have a parked row, with the last
// pending id of each. The parked keys are read first, once (an array of
// them), and the pending rows then looked up by key through
// outbox_pending_key. Written as a semi join (partition_key in (select …))
// the planner picked, on a table too fresh for statistics, a nested loop
// that scanned every pending row once per pending row: minutes before the
// relay streamed with 200,000 rows waiting. A parked row has failed at
// least once, so attempts > 0 lets the inner read use outbox_failing_key.
const selectBlockedKeys = `select partition_key, max(id) from outbox
 where published_at is null and skipped_at is null
   and partition_key = any(array(select partition_key from outbox
        where parked_at is not null and attempts > 0 and published_at is null and skipped_at is null))
 group by partition_key`

// loadBlocked reads the keys that have a parked row: their rows wait.
func (w *WALRelay) loadBlocked(ctx context.Context, s *walSession) error {
	rows, err := w.cfg.Pool.Query(ctx, selectBlockedKeys)
	if err != nil {
		return fmt.Errorf("read blocked keys: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var id int64
		if err := rows.Scan(&k, &id); err != nil {
			return err
		}
		s.blocked[k] = id
	}
	return rows.Err()
}

const selectKeyRows = `select id, event_id::text, partition_key, topic, event_type, event_version,
       payload::text, headers, created_at, attempts, parked_at is not null
  from outbox where partition_key = $1 and id <= $2 and published_at is null and skipped_at is null
 order by id`

// sweepBlocked looks at every blocked key: once its parked row was retried
// or skipped, its waiting rows (up to the last one the stream delivered)
// are published in order and the key flows through the stream again.
func (w *WALRelay) sweepBlocked(ctx context.Context, s *walSession) error {
	s.mu.Lock()
	keys := make(map[string]int64, len(s.blocked))
	for k, id := range s.blocked {
		keys[k] = id
	}
	s.mu.Unlock()
	for k, upTo := range keys {
		rows, err := w.cfg.Pool.Query(ctx, selectKeyRows, k, upTo)
		if err != nil {
			return fmt.Errorf("read rows of blocked key %s: %w", k, err)
		}
		var list []row
		parked := false
		for rows.Next() {
			var rw row
			var p bool
			if err := rows.Scan(&rw.id, &rw.eventID, &rw.key, &rw.topic, &rw.eventType, &rw.version,
				&rw.payload, &rw.headers, &rw.createdAt, &rw.attempts, &p); err != nil {
				rows.Close()
				return err
			}
			// A parked row anywhere among them keeps the key blocked:
			// the rows before it are still the stream's (produced, not
			// yet settled), and the sweep would otherwise produce the
			// parked row again, counting one more attempt each time.
			if p {
				parked = true
				break
			}
			list = append(list, rw)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if parked {
			continue
		}
		for _, rw := range list {
			rec := w.record(rw)
			if err := w.tooLarge(ctx, rec); err != nil {
				return w.fail(ctx, s, rw, err)
			}
			res := w.client.ProduceSync(ctx, rec)
			if err := res.FirstErr(); err != nil {
				return w.fail(ctx, s, rw, err)
			}
			if _, err := w.cfg.Pool.Exec(ctx, deletePublished, []int64{rw.id}); err != nil {
				return err
			}
			w.m.published.WithLabelValues(rw.topic).Inc()
		}
		s.mu.Lock()
		if s.blocked[k] == upTo {
			delete(s.blocked, k)
		}
		s.mu.Unlock()
		w.log.Info("blocked key flows again", "key", k, "published", len(list))
	}
	return nil
}

// drainPending publishes, in id order, every pending row up to id upTo of
// keys that are not blocked: the rows committed before the slot existed.
// As in the stream, a row is deleted only once Kafka acknowledged
// it, and a row the size check refuses counts an attempt before anything
// after it is produced (and is parked, blocking its key, once its attempts
// ran out). A failed record ends the drain with its error; the drain is not
// recorded as done, so the next session drains again.
func (w *WALRelay) drainPending(ctx context.Context, s *walSession, upTo int64) error {
	var last int64
	for {
		rows, err := w.cfg.Pool.Query(ctx, `select id, event_id::text, partition_key, topic, event_type, event_version,
		       payload::text, headers, created_at, attempts
		  from outbox where published_at is null and skipped_at is null and parked_at is null and id > $1 and id <= $2
		 order by id limit 1000`, last, upTo)
		if err != nil {
			return fmt.Errorf("read rows pending before the slot: %w", err)
		}
		var list []row
		for rows.Next() {
			var rw row
			if err := rows.Scan(&rw.id, &rw.eventID, &rw.key, &rw.topic, &rw.eventType, &rw.version,
				&rw.payload, &rw.headers, &rw.createdAt, &rw.attempts); err != nil {
				rows.Close()
				return err
			}
			list = append(list, rw)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(list) == 0 {
			return nil
		}
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			acked   []row
			failed  row
			ferr    error
			refused error
		)
		for _, rw := range list {
			last = rw.id
			s.mu.Lock()
			_, blocked := s.blocked[rw.key]
			if blocked {
				s.blocked[rw.key] = max(s.blocked[rw.key], rw.id) // left pending; the sweep publishes it once the key flows
			}
			s.mu.Unlock()
			if blocked {
				continue
			}
			rec := w.record(rw)
			if err := w.tooLarge(ctx, rec); err != nil {
				if err := w.fail(ctx, s, rw, err); err != nil {
					refused = err
					break
				}
				continue // parked: its key is blocked from here on
			}
			wg.Add(1)
			w.client.Produce(ctx, rec, func(_ *kgo.Record, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					if ferr == nil {
						failed = rw
						ferr = fmt.Errorf("produce event %s (%s) to topic %s, key %s: %w", rw.eventID, rw.eventType, rw.topic, rw.key, err)
					}
					return
				}
				acked = append(acked, rw)
			})
		}
		answered := make(chan struct{})
		go func() { wg.Wait(); close(answered) }()
		select {
		case <-answered:
		case <-ctx.Done():
			return ctx.Err() // nothing deleted: the next start drains these rows again
		}
		if len(acked) > 0 {
			ids := make([]int64, len(acked))
			for i, rw := range acked {
				ids[i] = rw.id
			}
			if _, err := w.cfg.Pool.Exec(ctx, deletePublished, ids); err != nil {
				return fmt.Errorf("delete %d published rows: %w", len(ids), err)
			}
			for _, rw := range acked {
				w.m.published.WithLabelValues(rw.topic).Inc()
			}
		}
		if refused != nil {
			return refused
		}
		if ferr != nil {
			if Refused(ferr) {
				if err := w.fail(ctx, s, failed, ferr); err != nil {
					return err
				}
			} else {
				w.m.failures.WithLabelValues(failed.topic, failureKind(ferr)).Inc()
			}
			return ferr
		}
	}
}

// lagLoop refreshes concord_relay_wal_slot_lag_bytes.
func (w *WALRelay) lagLoop(ctx context.Context) {
	for ctx.Err() == nil {
		var lag int64
		err := w.cfg.Pool.QueryRow(ctx, `select coalesce((pg_current_wal_lsn() - confirmed_flush_lsn)::bigint, 0)
			from pg_replication_slots where slot_name = $1`, w.w.Slot).Scan(&lag)
		if err == nil {
			w.lag.Set(float64(lag))
		}
		w.sleep(ctx, -1, w.cfg.MetricsInterval)
	}
}

// SlotLag is the slot's WAL lag in bytes now (-1 if the slot does not exist).
func (w *WALRelay) SlotLag(ctx context.Context) (int64, error) {
	lag := int64(-1)
	err := w.cfg.Pool.QueryRow(ctx, `select coalesce((pg_current_wal_lsn() - confirmed_flush_lsn)::bigint, -1)
		from pg_replication_slots where slot_name = $1`, w.w.Slot).Scan(&lag)
	if errors.Is(err, pgx.ErrNoRows) {
		return -1, nil
	}
	return lag, err
}

// walCleanupLoop deletes old rows marked published, which only the poll
// mode leaves (a table that was relayed in poll mode before); any instance
// may run it.
func (w *WALRelay) walCleanupLoop(ctx context.Context) {
	if w.cfg.Retention < 0 {
		return
	}
	for {
		w.sleep(ctx, -1, w.cfg.CleanupInterval)
		if ctx.Err() != nil {
			return
		}
		if n, err := w.Cleanup(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("outbox cleanup", "err", err, "deleted", n)
		}
	}
}

// Slot is the name of the relay's replication slot.
func (w *WALRelay) Slot() string { return w.w.Slot }
