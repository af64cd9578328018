package carriersim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/concordhq/concord/services/shipping/carriersim"
)

type sim struct {
	t   *testing.T
	srv *carriersim.Server
	url string
}

func newSim(t *testing.T, admin bool) *sim {
	t.Helper()
	s, err := carriersim.New(carriersim.Config{Seed: 7, Faults: carriersim.DefaultFaults(), Admin: admin, APIKey: "ck_test"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() { s.Drain(); hs.Close() })
	return &sim{t: t, srv: s, url: hs.URL}
}

func body(order, postal string) string {
	return `{"order_id":"` + order + `","address":{"line1":"1 Main St","city":"Berlin","postal_code":"` + postal +
		`","country":"DE"},"items":[{"sku":"SKU-1","quantity":2}]}`
}

// do sends a request and decodes the JSON answer into a map.
func (s *sim) do(ctx context.Context, method, path, key, b string) (int, map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, strings.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer ck_test")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return res.StatusCode, nil, err
	}
	return res.StatusCode, out, nil
}

func (s *sim) must(method, path, key, b string, want int) map[string]any {
	s.t.Helper()
	code, out, err := s.do(context.Background(), method, path, key, b)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	if code != want {
		s.t.Fatalf("%s %s: status %d, want %d: %v", method, path, code, want, out)
	}
	return out
}

func errField(out map[string]any, f string) string {
	e, _ := out["error"].(map[string]any)
	s, _ := e[f].(string)
	return s
}

func TestSameIdempotencyKeyReturnsTheOriginalShipmentAndOtherBodyIsRefused(t *testing.T) {
	s := newSim(t, false)
	first := s.must("POST", "/v1/shipments", "k1", body("o1", "10115"), http.StatusCreated)
	// The same meaning in another field order is the same request.
	again := s.must("POST", "/v1/shipments", "k1",
		`{"items":[{"quantity":2,"sku":"SKU-1"}],"address":{"country":"DE","postal_code":"10115","city":"Berlin","line1":"1 Main St"},"order_id":"o1"}`,
		http.StatusCreated)
	if first["id"] != again["id"] || first["id"] == "" {
		t.Fatalf("replay gave %v, first %v", again["id"], first["id"])
	}
	out := s.must("POST", "/v1/shipments", "k1", body("o2", "10115"), http.StatusUnprocessableEntity)
	if errField(out, "code") != carriersim.CodeKeyReused || errField(out, "param") != "Idempotency-Key" {
		t.Fatalf("reuse with another body: %v", out)
	}
	if n := len(s.srv.Shipments()); n != 1 {
		t.Fatalf("%d shipments, want 1", n)
	}
	st := s.srv.Stats()
	if st.Created != 1 || st.IdempotentReplays != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestBadRequestsNameTheField(t *testing.T) {
	s := newSim(t, false)
	cases := []struct{ name, key, body, param string }{
		{"no key", "", body("o1", "10115"), "Idempotency-Key"},
		{"no order", "k", strings.Replace(body("o1", "10115"), `"order_id":"o1"`, `"order_id":""`, 1), "order_id"},
		{"no postal code", "k", body("o1", ""), "address.postal_code"},
		{"bad country", "k", strings.Replace(body("o1", "1"), `"DE"`, `"de"`, 1), "address.country"},
		{"no items", "k", strings.Replace(body("o1", "1"), `[{"sku":"SKU-1","quantity":2}]`, `[]`, 1), "items"},
		{"zero quantity", "k", strings.Replace(body("o1", "1"), `"quantity":2`, `"quantity":0`, 1), "items[0].quantity"},
		{"not json", "k", `{`, "body"},
		{"unknown field", "k", `{"order":"x"}`, "body"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := s.must("POST", "/v1/shipments", c.key, c.body, http.StatusBadRequest)
			if got := errField(out, "param"); got != c.param {
				t.Fatalf("param %q, want %q: %v", got, c.param, out)
			}
		})
	}
	if n := len(s.srv.Shipments()); n != 0 {
		t.Fatalf("%d shipments after bad requests", n)
	}
	req, _ := http.NewRequest("GET", s.url+"/v1/shipments/shp_x", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no api key: %d", res.StatusCode)
	}
}

func TestDeclinedPostalCodeIsReplayedForItsKeyAndCreatesNothing(t *testing.T) {
	s := newSim(t, false)
	for range 2 {
		out := s.must("POST", "/v1/shipments", "kd", body("o1", "00000"), http.StatusUnprocessableEntity)
		if errField(out, "code") != carriersim.CodeUnsupportedPostalCode || errField(out, "param") != "address.postal_code" {
			t.Fatalf("decline: %v", out)
		}
	}
	list := s.must("GET", "/v1/shipments?idempotency_key=kd", "", "", http.StatusOK)
	if d := list["data"].([]any); len(d) != 0 {
		t.Fatalf("declined key lists %v", d)
	}
}

func TestCancelIsIdempotentAndRefusesShippedAndUnknownShipments(t *testing.T) {
	s := newSim(t, false)
	a := s.must("POST", "/v1/shipments", "ka", body("o1", "10115"), http.StatusCreated)
	b := s.must("POST", "/v1/shipments", "kb", body("o2", "10115"), http.StatusCreated)
	for range 2 {
		out := s.must("POST", "/v1/shipments/"+a["id"].(string)+"/cancel", "", "", http.StatusOK)
		if out["status"] != carriersim.StatusCancelled {
			t.Fatalf("cancel: %v", out)
		}
	}
	if st := s.srv.Stats(); st.Cancelled != 1 {
		t.Fatalf("cancelled %d times", st.Cancelled)
	}
	if err := s.srv.Ship(b["id"].(string)); err != nil {
		t.Fatal(err)
	}
	out := s.must("POST", "/v1/shipments/"+b["id"].(string)+"/cancel", "", "", http.StatusConflict)
	if errField(out, "code") != carriersim.CodeAlreadyShipped {
		t.Fatalf("cancel of shipped: %v", out)
	}
	out = s.must("POST", "/v1/shipments/shp_nope/cancel", "", "", http.StatusNotFound)
	if errField(out, "code") != carriersim.CodeResourceMissing {
		t.Fatalf("cancel of unknown: %v", out)
	}
	s.must("GET", "/v1/shipments/shp_nope", "", "", http.StatusNotFound)
	got := s.must("GET", "/v1/shipments/"+a["id"].(string), "", "", http.StatusOK)
	if got["status"] != carriersim.StatusCancelled {
		t.Fatalf("get after cancel: %v", got)
	}
}

func TestServerErrorsComeBeforeExecution(t *testing.T) {
	s := newSim(t, false)
	if _, err := s.srv.SetFaults(map[string]string{"5xx-next": "2"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		s.must("POST", "/v1/shipments", "k5", body("o1", "10115"), http.StatusServiceUnavailable)
	}
	if n := len(s.srv.Shipments()); n != 0 {
		t.Fatalf("a 503 created %d shipments", n)
	}
	s.must("POST", "/v1/shipments", "k5", body("o1", "10115"), http.StatusCreated)
	if st := s.srv.Stats(); st.Injected5xx != 2 || st.Created != 1 || st.IdempotentReplays != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestAWithheldAnswerStillCreatedTheShipmentAndTheKeyFindsIt(t *testing.T) {
	s := newSim(t, false)
	if _, err := s.srv.SetFaults(map[string]string{"hang-next": "1"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, _, err := s.do(ctx, "POST", "/v1/shipments", "kh", body("o1", "10115"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hung create: err %v, want the client's deadline", err)
	}
	list := s.must("GET", "/v1/shipments?idempotency_key=kh", "", "", http.StatusOK)
	d := list["data"].([]any)
	if len(d) != 1 || d[0].(map[string]any)["idempotency_key"] != "kh" {
		t.Fatalf("lookup by key: %v", list)
	}
	again := s.must("POST", "/v1/shipments", "kh", body("o1", "10115"), http.StatusCreated)
	if again["id"] != d[0].(map[string]any)["id"] || len(s.srv.Shipments()) != 1 {
		t.Fatalf("retry after the hang created another shipment: %v", again)
	}
}

func TestAdminSetsKnobsAllOrNothing(t *testing.T) {
	s := newSim(t, true)
	post := func(b string) int {
		res, err := http.Post(s.url+"/__admin/faults", "application/json", bytes.NewBufferString(b))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if c := post(`{"5xx-rate":"0.5","nope":"1"}`); c != http.StatusBadRequest {
		t.Fatalf("unknown knob: %d", c)
	}
	if c := post(`{"5xx-rate":"0.5","hang-next":"-1"}`); c != http.StatusBadRequest {
		t.Fatalf("bad value: %d", c)
	}
	if f := s.srv.Faults(); f.ServerErrorRate != 0 || f.HangNext != 0 {
		t.Fatalf("a refused change applied: %+v", f)
	}
	if c := post(`{"decline-rate":1,"decline-postal-codes":"99999, 12345"}`); c != http.StatusOK {
		t.Fatalf("good change: %d", c)
	}
	if f := s.srv.Faults(); f.DeclineRate != 1 || strings.Join(f.DeclinePostalCodes, "|") != "99999|12345" {
		t.Fatalf("faults %+v", f)
	}
	out := s.must("POST", "/v1/shipments", "kr", body("o1", "10115"), http.StatusUnprocessableEntity)
	if errField(out, "code") != carriersim.CodeUndeliverableAddress {
		t.Fatalf("decline-rate 1: %v", out)
	}
}
