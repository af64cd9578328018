package publisher

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Advisory lock namespaces (the first key of the two-int form). Locks are
// per database, so relays of different service databases never meet.
const (
	lockMember = 0x0c0d0001 // one per live relay instance: counted to share shards
	lockShard  = 0x0c0d0002 // one per shard: held by its owner
)

// owner holds this instance's shard locks on a dedicated session. The
// session is the lease: if the process dies, or the connection breaks, the
// server drops the locks and another instance takes the shards. Ownership
// spreads the work; per-key order does not depend on it (see Sendable), so a
// short overlap while a connection breaks cannot reorder a key.
type owner struct {
	pool     *pgxpool.Pool
	n        int
	interval time.Duration
	log      *slog.Logger
	m        *metrics

	mu     sync.Mutex
	owned  []int // sorted
	conn   *pgx.Conn
	member int32
}

func newOwner(pool *pgxpool.Pool, shards int, interval time.Duration, log *slog.Logger, m *metrics) *owner {
	return &owner{pool: pool, n: shards, interval: interval, log: log, m: m}
}

// shards returns a copy of the owned shards.
func (o *owner) shards() []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.owned)
}

// shardsFor returns the owned shards worker i of w works on.
func (o *owner) shardsFor(i, w int) []int32 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []int32
	for _, s := range o.owned {
		if s%w == i {
			out = append(out, int32(s))
		}
	}
	return out
}

// workerOf returns the worker of w that works on shard s (the inverse of
// shardsFor), or false when this instance does not own s.
func (o *owner) workerOf(s, w int) (int, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := slices.BinarySearch(o.owned, s); !ok {
		return 0, false
	}
	return s % w, true
}

func (o *owner) connected() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.conn != nil
}

// run rebalances every interval until ctx is done, then closes the session,
// which releases every lock at once. changed is called when shards were
// gained, so idle workers look at them at once.
func (o *owner) run(ctx context.Context, changed func()) {
	defer o.drop(context.Background())
	for {
		gained, err := o.tick(ctx)
		if err != nil && ctx.Err() == nil {
			o.log.Warn("shard ownership lost; reconnecting", "err", err)
			o.drop(ctx)
		}
		if gained {
			changed()
		}
		t := time.NewTimer(o.interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// drop closes the session: the server releases its locks.
func (o *owner) drop(ctx context.Context) {
	o.mu.Lock()
	conn := o.conn
	o.conn, o.owned = nil, nil
	o.mu.Unlock()
	o.m.ownedShards.Set(0)
	if conn != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}
}

func (o *owner) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg := o.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = "concord-relay"
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	// A random member key; on the rare collision with a live instance try
	// another, so every instance is counted once.
	for range 10 {
		member := rand.Int32()
		var ok bool
		if err := conn.QueryRow(cctx, "select pg_try_advisory_lock($1, $2)", int32(lockMember), member).Scan(&ok); err != nil {
			_ = conn.Close(cctx)
			return nil, fmt.Errorf("member lock: %w", err)
		}
		if ok {
			o.member = member
			return conn, nil
		}
	}
	_ = conn.Close(cctx)
	return nil, fmt.Errorf("member lock: no free member key after 10 tries")
}

// tick counts the live instances and moves towards this instance's fair
// share: it releases the shards above it and tries to lock free ones below
// it, starting at a point that differs per instance so instances do not all
// contend for shard 0.
func (o *owner) tick(ctx context.Context) (gained bool, err error) {
	o.mu.Lock()
	conn := o.conn
	o.mu.Unlock()
	if conn == nil {
		if conn, err = o.connect(ctx); err != nil {
			return false, err
		}
		o.mu.Lock()
		o.conn = conn
		o.mu.Unlock()
	}
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var members int
	err = conn.QueryRow(qctx, `select count(*) from pg_locks
		where locktype = 'advisory' and granted and objsubid = 2 and classid = $1::bigint::oid
		  and database = (select oid from pg_database where datname = current_database())`, int64(lockMember)).Scan(&members)
	if err != nil {
		return false, fmt.Errorf("count relay instances: %w", err)
	}
	o.m.members.Set(float64(members))
	target := FairShare(o.n, members)
	owned := o.shards()

	for len(owned) > target {
		s := owned[len(owned)-1]
		if _, err := conn.Exec(qctx, "select pg_advisory_unlock($1, $2)", int32(lockShard), int32(s)); err != nil {
			return false, fmt.Errorf("release shard %d: %w", s, err)
		}
		owned = owned[:len(owned)-1]
		o.set(owned)
	}
	start := int(uint32(o.member)) % o.n
	for i := 0; i < o.n && len(owned) < target; i++ {
		s := (start + i) % o.n
		if slices.Contains(owned, s) {
			continue
		}
		var ok bool
		if err := conn.QueryRow(qctx, "select pg_try_advisory_lock($1, $2)", int32(lockShard), int32(s)).Scan(&ok); err != nil {
			return gained, fmt.Errorf("lock shard %d: %w", s, err)
		}
		if ok {
			owned = append(owned, s)
			slices.Sort(owned)
			o.set(owned)
			gained = true
		}
	}
	return gained, nil
}

func (o *owner) set(owned []int) {
	o.mu.Lock()
	o.owned = slices.Clone(owned)
	o.mu.Unlock()
	o.m.ownedShards.Set(float64(len(owned)))
}
