package metricslint

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/infra/testkit/proc"
)

const modulePrefix = "github.com/concordhq/concord/"

// deployment is what a binary's start recipe may use.
type deployment struct {
	t       *testing.T
	admin   string // PostgreSQL admin URL: recipes create their databases
	brokers string
	prefix  string // topic prefix of this run
}

// recipe returns the arguments that start a binary with its ops server on
// addr. Binaries built on services/internal/svc (every saga service) share
// one; the rest name theirs here.
type recipe func(d *deployment, name, addr string) []string

func (d *deployment) db() string { return testkit.NewDatabase(d.t, d.admin) }

// The simulators' URLs given to the services and the reconciler answer
// nothing: a binary must serve /metrics without its outside systems.
var recipes = map[string]recipe{
	"relay": func(d *deployment, _, addr string) []string {
		return []string{"--database-url", d.db(), "--kafka-brokers", d.brokers, "--http-addr", addr, "--create-topics=false"}
	},
	"provider-sim": func(d *deployment, _, addr string) []string {
		return []string{"--http-addr", addr, "--data-dir", d.t.TempDir()}
	},
	"broker-sim": func(d *deployment, _, addr string) []string {
		return []string{"--http-addr", addr, "--data-dir", d.t.TempDir()}
	},
	"carrier-sim": func(d *deployment, _, addr string) []string {
		return []string{"--http-addr", addr}
	},
	"reconciler": func(d *deployment, _, addr string) []string {
		return []string{"run", "--database-url", d.db(), "--http-addr", addr,
			"--provider-url", "http://127.0.0.1:9", "--provider-api-key", "sk_test_metricslint"}
	},
	"console": func(d *deployment, _, addr string) []string {
		return []string{"--http-addr", addr, "--database-url", d.db(), "--orders-database-url", d.db(),
			"--inventory-database-url", d.db(), "--payments-database-url", d.db(), "--kafka-brokers", d.brokers,
			"--generate-admin"}
	},
}

// serviceExtras are the flags a svc-based service requires beyond the
// shared ones: a public API's listener (--http-addr) on a port of its own
// where the service has one, apart from the ops listener scraped here.
var serviceExtras = map[string][]string{
	"order-svc": {"--http-addr", "127.0.0.1:0"},
	"payment-svc": {"--http-addr", "127.0.0.1:0", "--provider-url", "http://127.0.0.1:9", "--provider-api-key", "sk_test_metricslint",
		"--webhook-secret", "whsec_metricslint"},
	"shipping-svc": {"--carrier-url", "http://127.0.0.1:9"},
	"funding-svc":  {"--broker-url", "http://127.0.0.1:9", "--firm-account", "firm-metricslint"},
}

func serviceRecipe(d *deployment, name, addr string) []string {
	return append([]string{"--database-url", d.db(), "--kafka-brokers", d.brokers, "--ops-addr", addr,
		"--topic-prefix", d.prefix, "--group", d.prefix + name, "--topic-partitions", "1"}, serviceExtras[name]...)
}

// binary is a main package that serves /metrics.
type binary struct {
	name, pkg string
	service   bool // built on services/internal/svc
}

// discover lists the main packages under <module>/cmd/ of every workspace
// module whose code, or the repository's code it imports, starts an ops
// server (kit.NewOpsServer, directly or through svc.Run).
func discover(t *testing.T, root string) []binary {
	t.Helper()
	goList := func(args ...string) []string {
		cmd := exec.Command("go", append([]string{"list", "-e"}, args...)...)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %v: %v", args, err)
		}
		return strings.Split(strings.TrimSpace(string(out)), "\n")
	}
	work, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, line := range strings.Split(string(work), "\n") {
		if dir := strings.TrimSpace(line); strings.HasPrefix(dir, "./") {
			if _, err := os.Stat(filepath.Join(root, dir, "cmd")); err == nil {
				patterns = append(patterns, dir+"/cmd/...")
			}
		}
	}
	// Which of the repository's packages start an ops server.
	serves := map[string]bool{}
	for _, line := range goList(append([]string{"-deps", "-f", "{{.ImportPath}}|{{.Dir}}|{{join .GoFiles \",\"}}"}, patterns...)...) {
		f := strings.SplitN(line, "|", 3)
		if len(f) != 3 || !strings.HasPrefix(f[0], modulePrefix) || f[0] == modulePrefix+"infra/kit" {
			continue
		}
		for _, file := range strings.Split(f[2], ",") {
			b, err := os.ReadFile(filepath.Join(f[1], file))
			if err == nil && strings.Contains(string(b), "NewOpsServer(") {
				serves[f[0]] = true
			}
		}
	}
	var bins []binary
	for _, line := range goList(append([]string{"-f", "{{.ImportPath}}|{{.Name}}|{{join .Deps \",\"}}"}, patterns...)...) {
		f := strings.SplitN(line, "|", 3)
		if len(f) != 3 || f[1] != "main" {
			continue
		}
		b := binary{name: filepath.Base(f[0]), pkg: f[0]}
		found := serves[f[0]]
		for _, dep := range strings.Split(f[2], ",") {
			found = found || serves[dep]
			b.service = b.service || dep == modulePrefix+"services/internal/svc"
		}
		if found {
			bins = append(bins, b)
		}
	}
	return bins
}

// startEveryBinary builds every binary that serves /metrics and starts
// each, as a parallel subtest of t named after it, with its ops server on a
// free port; check runs inside the subtest with the binary up and ready at
// base (http://host:port), and the binary stops when the subtest ends.
// When no subtest failed, each binary's last scrape by check is kept for
// exportedSeries.
func startEveryBinary(t *testing.T, check func(t *testing.T, b binary, base string) testkit.Metrics) {
	root := repoRoot(t)
	bins := discover(t, root)
	if len(bins) < 5 {
		t.Fatalf("discovered %d binaries serving /metrics (%v); the discovery is broken", len(bins), bins)
	}
	dir := t.TempDir()
	pkgs := make([]string, len(bins))
	for i, b := range bins {
		pkgs[i] = b.pkg
		if _, ok := recipes[b.name]; !ok && !b.service {
			t.Errorf("%s serves /metrics but this test has no recipe to start it: add one to recipes", b.name)
		}
	}
	if t.Failed() {
		return
	}
	if err := proc.GoBuild(root, dir+"/", pkgs...); err != nil {
		t.Fatal(err)
	}
	d := &deployment{t: t, admin: testkit.PostgresURL(t), brokers: strings.Join(testkit.NewKafka(t).Brokers, ","),
		prefix: testkit.UniqueName(t, "lint") + "."}
	ports, err := kit.FreePorts(len(bins))
	if err != nil {
		t.Fatal(err)
	}
	scrapes := newScrapeSet(bins)
	for i, b := range bins {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			d := *d
			d.t = t
			start := recipes[b.name]
			if start == nil {
				start = serviceRecipe
			}
			addr := fmt.Sprintf("127.0.0.1:%d", ports[i])
			p := proc.Start(t, proc.Command{Name: b.name, Path: filepath.Join(dir, b.name), Args: start(&d, b.name, addr),
				Log: filepath.Join(t.TempDir(), b.name+".log")})
			t.Cleanup(func() { _ = p.Stop(syscall.SIGTERM, 10*time.Second) })
			base := "http://" + addr
			if err := p.WaitReady(context.Background(), base+"/healthz", 60*time.Second); err != nil {
				t.Fatal(err)
			}
			if m := check(t, b, base); !t.Failed() {
				scrapes.add(b.name, m)
			}
		})
	}
	t.Cleanup(func() { scrapes.keepIfComplete() })
}

// Every binary that serves /metrics, started for real, answers a
// promlint-clean scrape that includes concord_build_info and counts the
// requests it served.
func TestEveryBinarysMetricsAreLintClean(t *testing.T) {
	startEveryBinary(t, func(t *testing.T, b binary, base string) testkit.Metrics {
		before := testkit.Scrape(t, base+"/metrics")
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		after := testkit.Scrape(t, base+"/metrics")
		healthz := map[string]string{"route": "/healthz", "code": "200", "method": "GET"}
		if a, b := after.Value("concord_http_requests_total", healthz), before.Value("concord_http_requests_total", healthz); a <= b {
			t.Errorf("concord_http_requests_total%v: %v before a GET /healthz, %v after", healthz, b, a)
		}
		if after.Value("concord_build_info", nil) != 1 {
			t.Errorf("concord_build_info missing")
		}
		for _, n := range after.Names() {
			if !strings.HasPrefix(n, "concord_") && !strings.HasPrefix(n, "go_") && !strings.HasPrefix(n, "process_") &&
				!strings.HasPrefix(n, "promhttp_") {
				t.Errorf("series %s: every series of the project is named concord_…", n)
			}
		}
		after.LintClean(t, b.name+" /metrics")
		return after
	})
}
