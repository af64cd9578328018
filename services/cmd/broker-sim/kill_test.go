package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/infra/testkit/proc"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "broker-sim-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "broker-sim")
	if err := proc.GoBuild(".", binary, "."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func call(t *testing.T, method, url string, body any, key string, out any) int {
	t.Helper()
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	req, _ := http.NewRequest(method, url, bytes.NewReader(b))
	req.SetBasicAuth("CK", "s")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	if out != nil {
		if err := json.NewDecoder(res.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
	}
	return res.StatusCode
}

// firstEvents reads n data lines of an SSE stream from the beginning.
func firstEvents(t *testing.T, url string, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.SetBasicAuth("CK", "s")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out []string
	sc := bufio.NewScanner(res.Body)
	for len(out) < n && sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "data: ") {
			out = append(out, line)
		}
	}
	if len(out) < n {
		t.Fatalf("read %d events of %d: %v", len(out), n, sc.Err())
	}
	return out
}

// TestSIGKILLForgetsNothingAnswered kills the process right after its
// answers; snapshots nobody waits for are an hour apart, so what survives
// was written because an answer waited for it.
func TestSIGKILLForgetsNothingAnswered(t *testing.T) {
	ports, err := kit.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	p := proc.Start(t, proc.Command{Name: "broker-sim", Path: binary, Log: filepath.Join(t.TempDir(), "broker-sim.log"),
		Args: []string{"--http-addr", fmt.Sprintf("127.0.0.1:%d", ports[0]), "--data-dir", t.TempDir(),
			"--snapshot-interval", "1h", "--seed", "5", "--admin"}})
	if err := p.WaitReady(t.Context(), base+"/healthz", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	var acct, firm map[string]any
	if st := call(t, "POST", base+"/v1/accounts", map[string]any{}, "", &acct); st != 200 {
		t.Fatalf("account: %d", st)
	}
	call(t, "GET", base+"/__admin/firm", nil, "", &firm)
	firmID := firm["firm_account"]
	body := map[string]any{"entry_type": "JNLC", "from_account": firmID, "to_account": acct["id"], "amount": "12.34"}
	var j map[string]any
	if st := call(t, "POST", base+"/v1/journals", body, "kill-key", &j); st != 200 {
		t.Fatalf("journal: %d %v", st, j)
	}

	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	if err := p.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitReady(t.Context(), base+"/healthz", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	var again map[string]any
	if st := call(t, "POST", base+"/v1/journals", body, "kill-key", &again); st != 200 || again["id"] != j["id"] {
		t.Fatalf("retry after SIGKILL: %d, journal %v, want the original %v", st, again["id"], j["id"])
	}
	ev := firstEvents(t, base+"/v2/events/journals/status?since_id=00000000000000000000000000", 1)[0]
	if !strings.Contains(ev, `"journal_id":"`+j["id"].(string)+`"`) {
		t.Fatalf("the journal's event is gone after SIGKILL: %s", ev)
	}
	var got map[string]any
	if st := call(t, "GET", base+"/v1/accounts/"+acct["id"].(string), nil, "", &got); st != 200 {
		t.Fatalf("the account is gone after SIGKILL: %d", st)
	}
}
