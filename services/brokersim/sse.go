package brokersim

import (
	"bufio"
	"fmt"
	"net/http"
	"time"

	"github.com/oklog/ulid/v2"
)

// streamKind is one SSE endpoint and the log it serves.
type streamKind struct {
	name string
	log  func(*state) []Event
}

var (
	journalStream  = streamKind{"journals", func(st *state) []Event { return st.JournalLog }}
	fundingStream  = streamKind{"funding", func(st *state) []Event { return st.FundingLog }}
	activityStream = streamKind{"activities", func(st *state) []Event { return st.ActivityLog }}
)

// holdLimit is the longest a message held back by the reorder fault waits
// for a message of another account to overtake it.
const holdLimit = 100 * time.Millisecond

// stream serves one SSE endpoint. With since_id (or since) it replays the
// log after the cursor and then follows it live; with until_id (or until)
// it ends, with 200, at the bound; without a cursor it sends only what
// happens from the moment of connection. A live reader that falls more
// than Config.SSEBuffer messages behind loses the oldest with the comment
// Alpaca sends, ": you are reading too slowly, dropped N messages".
func (s *Server) stream(kind streamKind) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, hr *http.Request) {
		if !s.gate(w, hr) {
			return
		}
		cur, err := ParseCursor(hr.URL.Query().Get)
		if err != nil {
			writeResponse(w, apiErr(http.StatusBadRequest, 40010000, err.Error()))
			return
		}
		// A live stream starts where the log stands before the client sees
		// the answer, so whatever it does after connecting is streamed.
		s.mu.Lock()
		pos := 0
		if cur.Live {
			pos = len(kind.log(s.st))
		}
		s.mu.Unlock()
		rc := http.NewResponseController(w)
		_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives the server's write timeout
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("Connection", "keep-alive")
		w.WriteHeader(http.StatusOK)
		s.calls.WithLabelValues(hr.Pattern, "ok").Inc()
		out := bufio.NewWriter(w)
		flush := func() bool {
			return out.Flush() == nil && rc.Flush() == nil
		}
		if !flush() {
			return
		}
		var untilIDTime time.Time
		if cur.UntilID != "" {
			untilIDTime = ulid.Time(ulid.MustParseStrict(cur.UntilID).Time())
		}
		first := true
		var held *Event
		send := func(ev Event) bool {
			if _, err := fmt.Fprintf(out, "data: %s\n\n", ev.Data); err != nil {
				return false
			}
			return true
		}
		heartbeat := time.NewTicker(s.cfg.Heartbeat)
		defer heartbeat.Stop()
		recheck := time.NewTicker(s.cfg.TickInterval) // the Clock moves without telling anyone
		defer recheck.Stop()
		for {
			s.mu.Lock()
			log := kind.log(s.st)
			batch := append([]Event(nil), log[pos:]...)
			pos = len(log)
			changed := s.changed
			need := s.durableAfter()
			faults := s.faults
			now := s.clock.Now()
			lastID := s.st.LastULID
			s.mu.Unlock()

			done := false
			var inside []Event
			for _, ev := range batch {
				switch cur.Locate(ev.ID, ev.At) {
				case Inside:
					inside = append(inside, ev)
				case After:
					if cur.UntilID != "" {
						done = true // ids only grow: nothing later is inside
					}
				}
				if done {
					break
				}
			}
			switch {
			case cur.UntilID != "" && cur.UntilID <= lastID:
				done = true // every later event gets a larger id
			case cur.UntilID != "" && now.After(untilIDTime):
				done = true
			case !cur.Until.IsZero() && !now.Before(cur.Until):
				done = true
			}
			if !first && len(inside) > s.cfg.SSEBuffer {
				dropped := len(inside) - s.cfg.SSEBuffer
				inside = inside[dropped:]
				s.count(func(st *Stats) { st.SSESlowDrops += int64(dropped) })
				fmt.Fprintf(out, ": you are reading too slowly, dropped %d messages\n\n", dropped)
			}
			first = false
			if len(inside) > 0 && !s.waitDurable(hr.Context(), need) {
				return
			}
			for _, ev := range inside {
				if s.dice.Chance(streamSSEDrop, faults.SSEDropRate) {
					s.count(func(st *Stats) { st.SSEDropped++ })
					continue
				}
				dup := s.dice.Chance(streamSSEDuplicate, faults.SSEDuplicateRate)
				hold := s.dice.Chance(streamSSEReorder, faults.SSEReorderRate)
				disconnect := s.dice.Chance(streamSSEDisconnect, faults.SSEDisconnectRate)
				switch {
				case held != nil && !shareAccount(held.Accounts, ev.Accounts):
					// ev overtakes the held message of another account.
					s.count(func(st *Stats) { st.SSEReordered++ })
					if !send(ev) || !send(*held) {
						return
					}
					held = nil
				case held != nil:
					if !send(*held) || !send(ev) {
						return
					}
					held = nil
				case hold:
					e := ev
					held = &e
				default:
					if !send(ev) {
						return
					}
				}
				if dup && held == nil {
					s.count(func(st *Stats) { st.SSEDuplicated++ })
					if !send(ev) {
						return
					}
				}
				if disconnect {
					s.count(func(st *Stats) { st.SSEDisconnects++ })
					if held != nil {
						send(*held)
					}
					flush()
					return
				}
			}
			if done {
				if held != nil {
					send(*held)
				}
				flush()
				return
			}
			if !flush() {
				return
			}
			var holdTimer <-chan time.Time
			if held != nil {
				holdTimer = time.After(holdLimit)
			}
			select {
			case <-changed:
			case <-holdTimer:
				if !send(*held) || !flush() {
					return
				}
				held = nil
			case <-heartbeat.C:
				fmt.Fprint(out, ":heartbeat\n\n")
				if !flush() {
					return
				}
			case <-recheck.C:
			case <-hr.Context().Done():
				return
			case <-s.ctx.Done():
				// What Alpaca's v2 streams say when the server closes them.
				fmt.Fprint(out, ": internal server error\n\n")
				flush()
				return
			}
		}
	})
}

func shareAccount(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}
