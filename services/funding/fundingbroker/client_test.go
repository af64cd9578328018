package fundingbroker_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/concordhq/concord/services/funding/fundingbroker"
)

func TestCentsRoundTripTheBrokersDecimalStrings(t *testing.T) {
	for s, want := range map[string]int64{"25.00": 2500, "7.5": 750, "3": 300, "-0.01": -1, "0.10": 10} {
		got, err := fundingbroker.ParseCents(s)
		if err != nil || got != want {
			t.Errorf("ParseCents(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, bad := range []string{"", "1.234", "abc", ".5"} {
		if _, err := fundingbroker.ParseCents(bad); err == nil {
			t.Errorf("ParseCents(%q) accepted", bad)
		}
	}
	if got := fundingbroker.FormatCents(2499); got != "24.99" {
		t.Errorf("FormatCents(2499) = %q", got)
	}
}

// The reader hands over data lines only (heartbeats and the slow-reader
// comment are not events), sends since_id, and reports a refusal as the
// broker's error.
func TestStreamReadsDataLinesFromTheCursor(t *testing.T) {
	var since string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("since_id") == "bad" {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"code":40010000,"message":"since_id"}`)
			return
		}
		since = r.URL.Query().Get("since_id")
		fmt.Fprint(w, ":heartbeat\n\ndata: {\"n\":1}\n\n: you are reading too slowly, dropped 10 messages\n\ndata: {\"n\":2}\n\n")
	}))
	defer srv.Close()
	c := &fundingbroker.Client{BaseURL: srv.URL, HTTP: srv.Client()}
	var got []string
	if err := c.Stream(context.Background(), "/v2/events/journals/status", "01KB", func(b []byte) error {
		got = append(got, string(b))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != `[{"n":1} {"n":2}]` || since != "01KB" {
		t.Fatalf("data %q from since_id %q", got, since)
	}
	err := c.Stream(context.Background(), "/x", "bad", func([]byte) error { return nil })
	if !fundingbroker.IsStatus(err, http.StatusBadRequest) {
		t.Fatalf("refusal: %v", err)
	}
}
