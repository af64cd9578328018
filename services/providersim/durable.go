package providersim

import (
	"context"
	"time"
)

// With a data dir the simulator never tells the outside world something a
// crash could make it forget, as Stripe never does: a request that finds
// the state changed (by itself or by anything before it) waits until a
// snapshot holding the change is written before it answers, and the
// webhook dispatcher waits the same way before it sends. A process killed
// with SIGKILL then restarts knowing every PaymentIntent, idempotency key
// and id it ever gave out, and its random streams continue past them, so
// no id is handed out twice. Snapshots are group commits: whoever waits at
// once shares one write.

// durableAfter is the snapshot every change made so far will be in: the
// next one while something is unwritten, else the newest taken, which may
// still be in flight (a read of a change it holds waits for it too, or a
// crash during the write would take back what the reader was told); 0 when
// state is not persisted. Called with s.mu held.
func (s *Server) durableAfter() uint64 {
	switch {
	case s.cfg.DataDir == "":
		return 0
	case s.dirty:
		return s.epoch + 1
	}
	return s.epoch
}

// waitDurable returns once snapshot need (from durableAfter) is written;
// false if ctx or the server ends first.
func (s *Server) waitDurable(ctx context.Context, need uint64) bool {
	for {
		s.mu.Lock()
		done, written := s.durable >= need, s.written
		s.mu.Unlock()
		if done {
			return true
		}
		select {
		case s.flush <- struct{}{}:
		default:
		}
		select {
		case <-written:
		case <-ctx.Done():
			return false
		case <-s.ctx.Done():
			return false
		}
	}
}

// runSnapshots writes a snapshot when someone waits for one, and at
// SnapshotInterval for changes nobody waits for (scheduled transitions).
// A failed write is logged and tried again.
func (s *Server) runSnapshots() {
	defer s.wg.Done()
	tick := time.NewTicker(s.cfg.SnapshotInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.flush:
		case <-tick.C:
		}
		if err := s.snapshot(); err != nil {
			s.log.Error("providersim: snapshot failed", "err", err)
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}
