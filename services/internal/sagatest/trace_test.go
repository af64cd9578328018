package sagatest

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/services/providersim"
)

// span is what the collector keeps of an exported span.
type span struct {
	service, name     string
	trace, id, parent string
	links             []string // the span ids it links to
}

// collector is an OTLP/HTTP trace receiver: the services' exporters post
// their spans to it.
type collector struct {
	mu    sync.Mutex
	spans []span
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req coltrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				var links []string
				for _, l := range sp.Links {
					links = append(links, hex.EncodeToString(l.SpanId))
				}
				c.spans = append(c.spans, span{service: service, name: sp.Name, trace: hex.EncodeToString(sp.TraceId),
					id: hex.EncodeToString(sp.SpanId), parent: hex.EncodeToString(sp.ParentSpanId), links: links})
			}
		}
	}
	c.mu.Unlock()
	resp, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(resp)
}

func (c *collector) all() []span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]span(nil), c.spans...)
}

// spanTree is the spans of one trace, by id.
type spanTree map[string]span

// find returns the first span of service named name that descends from
// (or is) the span with id from; "" for from matches any span.
func (t spanTree) find(service, name, from string) (span, bool) {
	for _, sp := range t {
		if sp.service == service && sp.name == name && (from == "" || t.descends(sp, from)) {
			return sp, true
		}
	}
	return span{}, false
}

// descends reports whether sp is the span with id from or one of its
// descendants, following parent links within the trace.
func (t spanTree) descends(sp span, from string) bool {
	for ok := true; ok; sp, ok = t[sp.parent] {
		if sp.id == from {
			return true
		}
	}
	return false
}

func (t spanTree) String() string {
	var lines []string
	for _, sp := range t {
		lines = append(lines, fmt.Sprintf("%s %s: %s (parent %s)", sp.id, sp.service, sp.name, sp.parent))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// One order is one trace from order-svc's POST /orders to its
// CONFIRMED: order-svc's relay, inventory-svc's handler and relay,
// payment-svc's handler, the charge attempt the charger takes from the
// payments table (a child of the handler's span that created the
// payment, whose traceparent the payment row stored) and its provider call, the provider's webhook
// applied under a span of the same parentage (linked to the webhook's own
// request, which came without trace context), payment-svc's relay, and
// order-svc's handler of payment.processed and the order.confirmed it
// appends. An event a handler appends carries the handler's span and
// names its cause.
func TestAnOrderIsOneTraceAcrossTheServices(t *testing.T) {
	t.Parallel()
	c := &collector{}
	ts := httptest.NewServer(c)
	t.Cleanup(ts.Close)
	s := newSaga(t, opts{otlp: ts.URL})
	s.stock(map[string]int{"SKU-TRACE": 1})
	// The provider answers "processing" and its webhook brings the
	// success: payment.processed comes from the webhook.
	id := s.order("SKU-TRACE", 1, providersim.PaymentMethodProcessing)
	if o := s.terminal(id, 30*time.Second); o.Status != "CONFIRMED" {
		t.Fatalf("order %s = %s (%s); want CONFIRMED", id, o.Status, o.Reason)
	}
	orderTopic, invTopic, payTopic := s.writer.TopicPrefix+"order-events", s.writer.TopicPrefix+"inventory-events", s.writer.TopicPrefix+"payment-events"
	var reservedBy span // inventory-svc's handler span of order.created
	eventually(t, 30*time.Second, "the order's spans in one trace, each the child of the one before", func() error {
		spans := c.all()
		var root span
		for _, sp := range spans {
			if sp.service == "order-svc" && sp.name == "POST /orders" {
				root = sp
			}
		}
		if root.trace == "" {
			return fmt.Errorf("no POST /orders span among %d", len(spans))
		}
		tr := spanTree{}
		for _, sp := range spans {
			if sp.trace == root.trace {
				tr[sp.id] = sp
			}
		}
		// Each hop: the span of service named name, below (or, direct,
		// the child of) the span found at the hop before.
		var errs []error
		hop := func(service, name string, below span, direct bool) span {
			sp, ok := tr.find(service, name, below.id)
			switch {
			case below.id == "" && len(errs) > 0:
			case !ok:
				errs = append(errs, fmt.Errorf("no %s %q span below %s %q", service, name, below.service, below.name))
			case direct && sp.parent != below.id:
				errs = append(errs, fmt.Errorf("%s %q has parent %s, want %s %q (%s)", service, name, sp.parent, below.service, below.name, below.id))
			}
			return sp
		}
		published := hop("order-svc", "publish "+orderTopic, root, false)
		reserved := hop("inventory-svc", "process order.created", published, false)
		relayed := hop("inventory-svc", "publish "+invTopic, reserved, true)
		hop("payment-svc", "process inventory.reserved", relayed, false)
		// The charge is decided by the later of the order's two events
		// at payment-svc (the reservation, or the order.created it
		// waited for); the payment row stores that handler's span.
		attempt := hop("payment-svc", "payment attempt", root, false)
		charge := tr[attempt.parent]
		if len(errs) == 0 && (charge.service != "payment-svc" || charge.name != "process inventory.reserved" && charge.name != "process order.created") {
			errs = append(errs, fmt.Errorf("the payment attempt's parent is %s %q, not payment-svc's handler of the order's events", charge.service, charge.name))
		}
		hop("payment-svc", "HTTP POST", attempt, true)
		applied := hop("payment-svc", "apply payment_intent.succeeded", charge, true)
		paid := hop("payment-svc", "publish "+payTopic, applied, true)
		confirm := hop("order-svc", "process payment.processed", paid, false)
		hop("order-svc", "publish "+orderTopic, confirm, true)
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("%w\ntrace %s:\n%s", err, root.trace, tr)
		}
		// The webhook's request came without trace context: a trace of
		// its own, which the apply span links to.
		for _, sp := range spans {
			if sp.service == "payment-svc" && sp.name == "POST /webhooks/stripe" && slices.Contains(applied.links, sp.id) {
				reservedBy = reserved
				return nil
			}
		}
		return fmt.Errorf("the apply span links to %v, none a payment-svc POST /webhooks/stripe span", applied.links)
	})

	// inventory.reserved, appended by inventory-svc's handler of
	// order.created: in the handler span's trace, caused by order.created.
	var createdID string
	if err := s.orders.QueryRow(context.Background(), `select event_id::text from outbox where event_type = 'order.created'`).Scan(&createdID); err != nil {
		t.Fatal(err)
	}
	var payload []byte
	var headers map[string]string
	if err := s.inventory.QueryRow(context.Background(), `select payload::text::bytea, headers from outbox where event_type = 'inventory.reserved'`).
		Scan(&payload, &headers); err != nil {
		t.Fatal(err)
	}
	env, err := schemas.DecodeEnvelope(payload)
	if err != nil {
		t.Fatal(err)
	}
	if sc := outbox.SpanContext(headers); sc.TraceID().String() != reservedBy.trace || sc.SpanID().String() != reservedBy.id {
		t.Errorf("inventory.reserved carries traceparent %q; want inventory-svc's handler span %s of trace %s", headers[schemas.HeaderTraceparent], reservedBy.id, reservedBy.trace)
	}
	if env.CausationID != createdID || env.CorrelationID != id {
		t.Errorf("inventory.reserved caused by %q in correlation %q; want order.created %s in order %s", env.CausationID, env.CorrelationID, createdID, id)
	}
}
