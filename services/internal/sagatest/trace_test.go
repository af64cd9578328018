package sagatest

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// span is what the collector keeps of an exported span.
type span struct {
	service, name     string
	trace, id, parent string
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
				c.spans = append(c.spans, span{service: service, name: sp.Name, trace: hex.EncodeToString(sp.TraceId),
					id: hex.EncodeToString(sp.SpanId), parent: hex.EncodeToString(sp.ParentSpanId)})
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

// One order is one trace from order-svc's POST /orders through its relay,
// inventory-svc's handler and relay, to payment-svc's handler, each hop's
// span the child of a span of the trace.
func TestAnOrderIsOneTraceAcrossTheServices(t *testing.T) {
	t.Parallel()
	c := &collector{}
	ts := httptest.NewServer(c)
	t.Cleanup(ts.Close)
	s := newSaga(t, opts{otlp: ts.URL})
	s.stock(map[string]int{"SKU-TRACE": 1})
	id := s.order("SKU-TRACE", 1, "pm_card_visa")
	if o := s.terminal(id, 30*time.Second); o.Status != "CONFIRMED" {
		t.Fatalf("order %s = %s (%s); want CONFIRMED", id, o.Status, o.Reason)
	}
	want := []struct{ service, name string }{
		{"order-svc", "POST /orders"},
		{"order-svc", "publish " + s.writer.TopicPrefix + "order-events"},
		{"inventory-svc", "process order.created"},
		{"inventory-svc", "publish " + s.writer.TopicPrefix + "inventory-events"},
		{"payment-svc", "process inventory.reserved"},
	}
	eventually(t, 30*time.Second, "the order's spans in one trace", func() error {
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
		ids := map[string]bool{}
		var in []span
		for _, sp := range spans {
			if sp.trace == root.trace {
				ids[sp.id] = true
				in = append(in, sp)
			}
		}
		for _, w := range want {
			found := false
			for _, sp := range in {
				if sp.service == w.service && sp.name == w.name {
					found = true
					if sp != root && !ids[sp.parent] {
						return fmt.Errorf("%s's %q span has parent %s, not a span of the trace", w.service, w.name, sp.parent)
					}
				}
			}
			if !found {
				var names []string
				for _, sp := range in {
					names = append(names, sp.service+": "+sp.name)
				}
				return fmt.Errorf("no %s %q span in trace %s; it has:\n%s", w.service, w.name, root.trace, strings.Join(names, "\n"))
			}
		}
		return nil
	})
	// The charge runs apart from the handler that asked for it (payment-svc's
	// charger takes it from its table), so the payment's outcome starts a
	// trace of its own there: order-svc handles payment.processed under the
	// payment attempt's span or under the webhook's request.
	eventually(t, 30*time.Second, "order-svc's payment.processed under a payment-svc span", func() error {
		spans := c.all()
		byID := map[string]span{}
		for _, sp := range spans {
			byID[sp.id] = sp
		}
		for _, sp := range spans {
			if sp.service != "order-svc" || sp.name != "process payment.processed" {
				continue
			}
			path := []string{sp.service + ": " + sp.name}
			for p, ok := byID[sp.parent]; ok; p, ok = byID[p.parent] {
				path = append(path, p.service+": "+p.name)
				if p.parent == "" || p.parent == "0000000000000000" {
					if p.service == "payment-svc" && (p.name == "payment attempt" || strings.HasPrefix(p.name, "POST /webhooks")) {
						return nil
					}
				}
			}
			return fmt.Errorf("payment.processed handled under %v", path)
		}
		return fmt.Errorf("no order-svc span for payment.processed among %d", len(spans))
	})
}
