package kit_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/concordhq/concord/infra/kit"
)

// servers are the ops server and an API server beside it, each with the
// mux handlers are mounted on.
func servers(t *testing.T) map[string]struct {
	hs  *http.Server
	mux *http.ServeMux
} {
	t.Helper()
	ops, err := kit.NewOpsServer("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	api, err := ops.NewAPIServer("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return map[string]struct {
		hs  *http.Server
		mux *http.ServeMux
	}{"ops": {ops.HTTPServer(), ops.Mux}, "api": {api.HTTPServer(), api.Mux}}
}

func TestEveryServerSetsEveryTimeout(t *testing.T) {
	for which, srv := range servers(t) {
		hs := srv.hs
		for name, got := range map[string]any{
			"ReadHeaderTimeout": hs.ReadHeaderTimeout == kit.DefaultReadHeaderTimeout && hs.ReadHeaderTimeout > 0,
			"ReadTimeout":       hs.ReadTimeout == kit.DefaultReadTimeout && hs.ReadTimeout > 0,
			"WriteTimeout":      hs.WriteTimeout == kit.DefaultWriteTimeout && hs.WriteTimeout > 0,
			"IdleTimeout":       hs.IdleTimeout == kit.DefaultIdleTimeout && hs.IdleTimeout > 0,
		} {
			if got != true {
				t.Errorf("%s server: %s not set to its default", which, name)
			}
		}
	}
}

// The API server is public: nothing of the ops server answers on it.
func TestAPIServerServesNoneOfTheOpsEndpoints(t *testing.T) {
	srvs := servers(t)
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		for which, want := range map[string]int{"ops": http.StatusOK, "api": http.StatusNotFound} {
			rec := httptest.NewRecorder()
			srvs[which].hs.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			if rec.Code != want {
				t.Errorf("GET %s on the %s server: %d, want %d", path, which, rec.Code, want)
			}
		}
	}
}

// echo reads the whole body as an API handler would and answers 413 on a
// *http.MaxBytesError, 200 otherwise.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		kit.WriteBodyTooLarge(w, tooBig.Limit)
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	default:
		_, _ = w.Write(b)
	}
})

func TestEveryServerRefusesBodiesOverTheLimitWith413(t *testing.T) {
	for which, srv := range servers(t) {
		t.Run(which, func(t *testing.T) {
			srv.mux.Handle("POST /echo", echo)
			refusesBodiesOverTheLimit(t, srv.hs.Handler)
		})
	}
}

func refusesBodiesOverTheLimit(t *testing.T, h http.Handler) {
	ts := httptest.NewServer(h)
	defer ts.Close()
	over := bytes.Repeat([]byte("x"), int(kit.DefaultMaxBodyBytes)+1)
	cases := []struct {
		name     string
		body     io.Reader
		length   int64
		wantCode int
	}{
		{"at the limit", bytes.NewReader(over[:kit.DefaultMaxBodyBytes]), kit.DefaultMaxBodyBytes, http.StatusOK},
		{"declared length over the limit", bytes.NewReader(over), int64(len(over)), http.StatusRequestEntityTooLarge},
		{"chunked body over the limit", io.MultiReader(bytes.NewReader(over)), -1, http.StatusRequestEntityTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, ts.URL+"/echo", c.body)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = c.length
			resp, err := ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != c.wantCode {
				t.Fatalf("status %d, want %d: %.200s", resp.StatusCode, c.wantCode, b)
			}
			if c.wantCode == http.StatusRequestEntityTooLarge {
				if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type %q, want application/json", ct)
				}
				if !strings.Contains(string(b), `"body larger than 1048576 bytes"`) {
					t.Errorf("body %q does not name the limit", b)
				}
			}
		})
	}
}
