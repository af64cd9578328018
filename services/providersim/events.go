package providersim

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// EventTypes are the event types the simulator emits, the values
// Config.WebhookEvents may name (besides "*").
var EventTypes = []string{
	"payment_intent.created", "payment_intent.processing", "payment_intent.succeeded",
	"payment_intent.payment_failed", "payment_intent.canceled", "payment_intent.requires_action",
	"payment_intent.amount_capturable_updated", "charge.succeeded", "charge.captured", "charge.expired",
	"charge.refunded", "refund.created",
}

// CheckWebhookEvents refuses a type the simulator never emits: an endpoint
// subscribed to a misspelt type would wait for webhooks that never come.
func CheckWebhookEvents(types []string) error {
	for _, typ := range types {
		if typ != "*" && !slices.Contains(EventTypes, typ) {
			return fmt.Errorf("providersim: webhook event type %q is not one the simulator emits (%s, or *)", typ, strings.Join(EventTypes, ", "))
		}
	}
	return nil
}

// emit records an Event for a state change and queues its webhook
// deliveries (subject to the webhook faults). obj is the object after the
// change; previous holds the attributes it had before. r is nil when the
// provider acts by itself (scheduled transitions, forced statuses).
// Called with s.mu held.
func (s *Server) emit(r *request, typ string, obj any, previous map[string]any) {
	now := s.clock.Now()
	ev := &event{Seq: s.st.nextSeq(), ID: s.dice.id("evt"), Type: typ, Created: now.Unix(),
		APIVersion: s.cfg.APIVersion, Object: mustJSON(obj), Previous: previous}
	if s.webhookEnabled(typ) {
		ev.Endpoints = len(s.cfg.WebhookEndpoints)
	}
	var sc trace.SpanContext
	if r != nil {
		sc = r.trace
		ev.Created = r.now.Unix()
		ev.RequestID = r.requestID
		ev.IdemKey = r.idemKey
		now = r.now
	}
	s.st.Events = append(s.st.Events, ev)
	s.st.eventByID[ev.ID] = ev
	s.stats.EventsCreated++
	s.dirty = true
	s.enqueueWebhooks(ev, now, sc)
}

// EventRetention is how long events stay retrievable and listed, as on
// Stripe (30 days).
const EventRetention = 30 * 24 * time.Hour

// expireEvents forgets events older than EventRetention; a list cursor
// naming one becomes unknown (400 resource_missing). Called with s.mu held.
func (s *Server) expireEvents(now time.Time) {
	cut := now.Add(-EventRetention).Unix()
	n := 0
	for n < len(s.st.Events) && s.st.Events[n].Created < cut {
		delete(s.st.eventByID, s.st.Events[n].ID)
		n++
	}
	if n > 0 {
		s.st.Events = slices.Clone(s.st.Events[n:])
		s.dirty = true
	}
}

type eventRequest struct {
	ID             *string `json:"id"`
	IdempotencyKey *string `json:"idempotency_key"`
}

type eventData struct {
	Object             any            `json:"object"`
	PreviousAttributes map[string]any `json:"previous_attributes,omitempty"`
}

type eventJSON struct {
	ID              string       `json:"id"`
	Object          string       `json:"object"`
	APIVersion      string       `json:"api_version"`
	Created         int64        `json:"created"`
	Data            eventData    `json:"data"`
	Livemode        bool         `json:"livemode"`
	PendingWebhooks int          `json:"pending_webhooks"`
	Request         eventRequest `json:"request"`
	Type            string       `json:"type"`
}

func renderEvent(ev *event) eventJSON {
	return eventJSON{ID: ev.ID, Object: "event", APIVersion: ev.APIVersion, Created: ev.Created,
		Data:            eventData{Object: ev.Object, PreviousAttributes: ev.Previous},
		PendingWebhooks: ev.Endpoints, Type: ev.Type,
		Request: eventRequest{ID: strPtr(ev.RequestID), IdempotencyKey: strPtr(ev.IdemKey)}}
}

// retrieveEvent handles GET /v1/events/{id}.
func (s *Server) retrieveEvent(r *request) response {
	if e := r.form.only("expand[", "expand"); e != nil {
		return e.response()
	}
	ev, ok := s.st.eventByID[r.pathID]
	if !ok {
		return notFound("id", "event", r.pathID).response()
	}
	return jsonResponse(http.StatusOK, renderEvent(ev))
}

// listEvents handles GET /v1/events with created[…], type (exact, or a
// prefix ending in "*" such as payment_intent.*), types[] and pagination,
// newest first.
func (s *Server) listEvents(r *request) response {
	if e := r.form.only("limit", "starting_after", "ending_before", "created", "created[", "type", "types[", "types", "delivery_success", "expand[", "expand"); e != nil {
		return e.response()
	}
	w, e := readListWindow(r.form)
	if e != nil {
		return e.response()
	}
	var patterns []string
	if t, ok := r.form.get("type"); ok {
		patterns = append(patterns, t)
	}
	for k, vs := range r.form {
		if k == "types" || strings.HasPrefix(k, "types[") {
			patterns = append(patterns, vs...)
		}
	}
	out, e := paginate(s.st.Events, w,
		func(x *event) int64 { return x.Seq }, func(x *event) int64 { return x.Created },
		func(x *event) bool { return len(patterns) == 0 || matchesAny(x.Type, patterns) },
		func(id string) (int64, bool) {
			x, ok := s.st.eventByID[id]
			if !ok {
				return 0, false
			}
			return x.Seq, true
		},
		func(x *event) any { return renderEvent(x) }, "/v1/events")
	if e != nil {
		return e.response()
	}
	return jsonResponse(http.StatusOK, out)
}

func matchesAny(typ string, patterns []string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(typ, prefix) {
				return true
			}
		} else if typ == p {
			return true
		}
	}
	return false
}
