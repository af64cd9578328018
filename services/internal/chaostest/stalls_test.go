package chaostest

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// stalls samples the consumer groups' lag and committed offsets and keeps,
// per group, the longest time it had records to consume while its
// committed offsets stood still: how long a killed or paused member cost.
type stalls struct {
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	longest map[string]time.Duration
}

// sampleEvery is the sampler's resolution.
const sampleEvery = 200 * time.Millisecond

func watchStalls(ctx context.Context, adm *kadm.Client, groups []string) *stalls {
	ctx, cancel := context.WithCancel(ctx)
	s := &stalls{cancel: cancel, done: make(chan struct{}), longest: map[string]time.Duration{}}
	type state struct {
		committed int64
		since     time.Time // when committed last moved, or lag was last zero
	}
	last := map[string]state{}
	for _, g := range groups {
		s.longest[g] = 0
	}
	go func() {
		defer close(s.done)
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			lags, err := adm.Lag(ctx, groups...)
			if err != nil {
				continue // the broker is restarting: the next sample tells
			}
			now := time.Now()
			for g, l := range lags {
				if l.Error() != nil {
					continue
				}
				var committed int64
				for _, ps := range l.Lag {
					for _, p := range ps {
						committed += max(p.Commit.At, 0)
					}
				}
				st, seen := last[g]
				if !seen || committed != st.committed || l.Lag.Total() == 0 {
					last[g] = state{committed: committed, since: now}
					continue
				}
				s.mu.Lock()
				s.longest[g] = max(s.longest[g], now.Sub(st.since))
				s.mu.Unlock()
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the longest stall per group.
func (s *stalls) stop() map[string]time.Duration {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.longest
}
