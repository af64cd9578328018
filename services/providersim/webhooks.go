package providersim

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/concordhq/concord/infra/backoff"
)

// SignatureHeader returns the Stripe-Signature header for payload sent at
// t: "t=<unix>,v1=<hex HMAC-SHA256 of "<unix>.<payload>" keyed by secret>".
func SignatureHeader(secret string, t time.Time, payload []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte("."))
	mac.Write(payload)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// delivery is one event on its way to one endpoint.
type delivery struct {
	seq      int64
	eventID  string
	payload  []byte
	endpoint string
	due      time.Time // earliest send; for a held delivery, the end of its hold
	held     bool      // reordered: waits until a later delivery to the endpoint was sent
	attempt  int
	trace    trace.SpanContext // of the request that caused the event, if any
}

// webhookQueue holds deliveries not yet sent. In memory only: a restart
// forgets them (the events themselves are kept and listed).
type webhookQueue struct {
	next     int64
	pending  []*delivery
	lastSent map[string]int64 // endpoint → highest seq sent
}

// enqueueWebhooks queues ev for every endpoint, drawing the webhook faults
// once per (event, endpoint): drop, duplicate, reorder, delay.
// Called with s.mu held.
func (s *Server) enqueueWebhooks(ev *event, now time.Time, sc trace.SpanContext) {
	if ev.Endpoints == 0 { // no endpoint subscribes to its type
		return
	}
	payload := mustJSON(renderEvent(ev))
	f := s.faults
	for _, ep := range s.cfg.WebhookEndpoints {
		drop := s.dice.Chance(streamWebhookDrop, f.WebhookDropRate)
		dup := s.dice.Chance(streamWebhookDuplicate, f.WebhookDuplicateRate)
		reorder := s.dice.Chance(streamWebhookReorder, f.WebhookReorderRate)
		delay := s.dice.Chance(streamWebhookDelay, f.WebhookDelayRate)
		if drop {
			s.stats.WebhooksDropped++
			s.log.Debug("providersim: dropping webhook", "event_id", ev.ID, "endpoint", ep)
			continue
		}
		d := &delivery{eventID: ev.ID, payload: payload, endpoint: ep, due: now, trace: sc}
		if delay {
			s.stats.WebhooksDelayed++
			d.due = now.Add(f.WebhookDelay)
		}
		if reorder {
			s.stats.WebhooksReordered++
			d.held = true
			d.due = d.due.Add(f.WebhookDelay)
		}
		s.push(d)
		if dup {
			s.stats.WebhooksDuplicated++
			twin := *d
			twin.held = false
			s.push(&twin)
		}
	}
}

// webhookEnabled reports whether events of typ are sent to the endpoints.
func (s *Server) webhookEnabled(typ string) bool {
	if len(s.cfg.WebhookEndpoints) == 0 {
		return false
	}
	return len(s.cfg.WebhookEvents) == 0 || slices.Contains(s.cfg.WebhookEvents, "*") || slices.Contains(s.cfg.WebhookEvents, typ)
}

func (s *Server) push(d *delivery) {
	s.hooks.next++
	d.seq = s.hooks.next
	s.hooks.pending = append(s.hooks.pending, d)
}

// due removes and returns the deliveries that may be sent now, in queue
// order. Called with s.mu held.
func (s *Server) dueDeliveries(now time.Time) []*delivery {
	var out []*delivery
	keep := s.hooks.pending[:0]
	for _, d := range s.hooks.pending {
		ready := !now.Before(d.due)
		if d.held && s.hooks.lastSent[d.endpoint] > d.seq {
			ready = true
		}
		if ready {
			out = append(out, d)
		} else {
			keep = append(keep, d)
		}
	}
	clear(s.hooks.pending[len(keep):])
	s.hooks.pending = keep
	slices.SortFunc(out, func(a, b *delivery) int { return int(a.seq - b.seq) })
	return out
}

// runDispatcher sends due webhooks in queue order, WebhookConcurrency at a
// time, until Close; with one slot a slow endpoint delays every delivery
// behind it (by at most WebhookTimeout per attempt). A non-2xx answer or a
// transport error is retried after WebhookBackoff·2^(attempt-1) (capped at
// WebhookMaxBackoff, on the Clock) until WebhookMaxAttempts, then given up
// and counted.
func (s *Server) runDispatcher() {
	defer s.wg.Done()
	tick := time.NewTicker(s.cfg.TickInterval)
	defer tick.Stop()
	slots := make(chan struct{}, s.cfg.WebhookConcurrency)
	var inFlight sync.WaitGroup
	defer inFlight.Wait()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		case <-s.wake:
		}
		s.mu.Lock()
		batch := s.dueDeliveries(s.clock.Now())
		need := s.durableAfter()
		s.mu.Unlock()
		// An event is sent only once the simulator cannot forget it.
		if len(batch) > 0 && !s.waitDurable(s.ctx, need) {
			s.mu.Lock()
			s.hooks.pending = append(s.hooks.pending, batch...)
			s.mu.Unlock()
			return
		}
		for i, d := range batch {
			select {
			case slots <- struct{}{}:
			case <-s.ctx.Done():
			}
			if s.ctx.Err() != nil {
				s.mu.Lock()
				s.hooks.pending = append(s.hooks.pending, batch[i:]...)
				s.mu.Unlock()
				return
			}
			inFlight.Add(1)
			go func() {
				defer func() { <-slots; inFlight.Done() }()
				s.delivered(d, s.send(d))
			}()
		}
	}
}

// delivered records the outcome of one delivery attempt: sent, or queued
// again with backoff, or given up.
func (s *Server) delivered(d *delivery, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.stats.WebhooksSent++
		if s.hooks.lastSent == nil {
			s.hooks.lastSent = make(map[string]int64)
		}
		s.hooks.lastSent[d.endpoint] = max(s.hooks.lastSent[d.endpoint], d.seq)
		return
	}
	s.stats.WebhookFailures++
	d.attempt++
	if d.attempt >= s.cfg.WebhookMaxAttempts {
		s.stats.WebhooksGivenUp++
		s.log.Warn("providersim: giving up webhook", "event_id", d.eventID, "endpoint", d.endpoint, "attempts", d.attempt, "err", err)
		return
	}
	wait := backoff.Exponential(d.attempt, s.cfg.WebhookBackoff, s.cfg.WebhookMaxBackoff)
	d.held = false
	d.due = s.clock.Now().Add(wait)
	s.hooks.pending = append(s.hooks.pending, d)
	s.log.Info("providersim: webhook failed, will retry", "event_id", d.eventID, "endpoint", d.endpoint, "attempt", d.attempt, "backoff", wait, "err", err)
}

// send makes one delivery attempt, signed at the moment of sending.
func (s *Server) send(d *delivery) error {
	ctx := s.ctx
	if d.trace.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, d.trace)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.endpoint, bytes.NewReader(d.payload))
	if err != nil {
		return fmt.Errorf("providersim: webhook %s to %s: %w", d.eventID, d.endpoint, err)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)")
	req.Header.Set("Stripe-Signature", SignatureHeader(s.cfg.WebhookSecret, s.clock.Now(), d.payload))
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("providersim: webhook %s to %s: %w", d.eventID, d.endpoint, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("providersim: webhook %s to %s: endpoint answered %d", d.eventID, d.endpoint, resp.StatusCode)
	}
	return nil
}
