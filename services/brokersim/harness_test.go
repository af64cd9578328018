package brokersim

import (
	"bufio"
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

	"github.com/concordhq/concord/infra/testkit"
)

var t0 = time.Date(2026, 3, 2, 14, 0, 0, 0, time.UTC)

type harness struct {
	t     *testing.T
	srv   *Server
	http  *httptest.Server
	clock *ManualClock
}

// newHarness starts a simulator on a manual clock; cfg's zero fields take
// the package defaults.
func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	clock := NewManualClock(t0)
	if cfg.Clock == nil {
		cfg.Clock = clock
	} else {
		clock = cfg.Clock.(*ManualClock)
	}
	if cfg.TickInterval == 0 {
		cfg.TickInterval = 5 * time.Millisecond
	}
	cfg.Admin = true
	if cfg.RateLimit == 0 {
		cfg.RateLimit = -1 // polling tests would meet it; TestRateLimit sets one
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		_ = srv.Close()
		hs.Close()
	})
	return &harness{t: t, srv: srv, http: hs, clock: clock}
}

// do sends an authenticated request and decodes a JSON answer into out
// (when out is not nil).
func (h *harness) do(method, path string, body any, header map[string]string, out any) *http.Response {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, h.http.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	req.SetBasicAuth("CK_TEST", "secret")
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := h.http.Client().Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if out != nil && res.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			h.t.Fatalf("%s %s: decoding %s: %v", method, path, b, err)
		}
	}
	res.Body = io.NopCloser(bytes.NewReader(b))
	return res
}

func (h *harness) must(status int, res *http.Response) {
	h.t.Helper()
	if res.StatusCode != status {
		b, _ := io.ReadAll(res.Body)
		h.t.Fatalf("%s %s: status %d, want %d: %s", res.Request.Method, res.Request.URL.Path, res.StatusCode, status, b)
	}
}

func (h *harness) account() string {
	h.t.Helper()
	var a map[string]any
	h.must(200, h.do("POST", "/v1/accounts", map[string]any{"contact": map[string]any{"email_address": "a@example.com"}}, nil, &a))
	return a["id"].(string)
}

func (h *harness) journal(to, amount, key string) map[string]any {
	h.t.Helper()
	var j map[string]any
	hdr := map[string]string{}
	if key != "" {
		hdr["Idempotency-Key"] = key
	}
	h.must(200, h.do("POST", "/v1/journals", map[string]any{"entry_type": "JNLC", "from_account": h.srv.FirmAccountID(),
		"to_account": to, "amount": amount}, hdr, &j))
	return j
}

func (h *harness) setFaults(values map[string]string) {
	h.t.Helper()
	f := h.srv.Faults()
	if err := f.Apply(values); err != nil {
		h.t.Fatal(err)
	}
	if err := h.srv.SetFaults(f); err != nil {
		h.t.Fatal(err)
	}
}

// eventually is testkit.Eventually for a condition without a reason.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, what, func() error {
		if !cond() {
			return errors.New("not yet")
		}
		return nil
	})
}

// sseLine is one line of interest of an SSE stream: a data payload or a
// comment.
type sseLine struct {
	data    map[string]any
	comment string
}

// sse is an open SSE stream read line by line in the background.
type sse struct {
	t      *testing.T
	res    *http.Response
	lines  chan sseLine
	ended  chan struct{}
	cancel context.CancelFunc
}

func (h *harness) open(path string) *sse {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", h.http.URL+path, nil)
	req.SetBasicAuth("CK_TEST", "secret")
	res, err := h.http.Client().Do(req)
	if err != nil {
		cancel()
		h.t.Fatalf("GET %s: %v", path, err)
	}
	s := &sse{t: h.t, res: res, lines: make(chan sseLine, 1000), ended: make(chan struct{}), cancel: cancel}
	h.t.Cleanup(func() { cancel(); res.Body.Close() })
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		h.t.Fatalf("GET %s: status %d: %s", path, res.StatusCode, b)
	}
	go func() {
		defer close(s.ended)
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "data: "):
				var m map[string]any
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m); err != nil {
					panic(err)
				}
				s.lines <- sseLine{data: m}
			case strings.HasPrefix(line, ":") && line != ":heartbeat":
				s.lines <- sseLine{comment: line}
			}
		}
	}()
	return s
}

// next returns the next data or comment line.
func (s *sse) next() sseLine {
	s.t.Helper()
	select {
	case l := <-s.lines:
		return l
	case <-s.ended:
		select {
		case l := <-s.lines:
			return l
		default:
		}
		s.t.Fatal("stream ended")
	case <-time.After(10 * time.Second):
		s.t.Fatal("timed out waiting for an SSE message")
	}
	return sseLine{}
}

// events reads n data messages.
func (s *sse) events(n int) []map[string]any {
	s.t.Helper()
	var out []map[string]any
	for len(out) < n {
		if l := s.next(); l.data != nil {
			out = append(out, l.data)
		}
	}
	return out
}

// rest reads every data message until the server ends the stream.
func (s *sse) rest() []map[string]any {
	s.t.Helper()
	select {
	case <-s.ended:
	case <-time.After(10 * time.Second):
		s.t.Fatal("the stream did not end")
	}
	var out []map[string]any
	for {
		select {
		case l := <-s.lines:
			if l.data != nil {
				out = append(out, l.data)
			}
		default:
			return out
		}
	}
}

func ids(evs []map[string]any) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e["event_id"].(string)
	}
	return out
}
