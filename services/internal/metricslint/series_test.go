package metricslint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	promql "github.com/prometheus/prometheus/promql/parser"

	"github.com/concordhq/concord/infra/testkit"
)

// family is a metric family some binary exports, with what the sources say
// about it.
type family struct {
	typ    string          // counter, gauge, histogram, summary or untyped
	labels map[string]bool // its label names; nil when no source names them
	from   []string        // where it was found, for the failure messages
}

// catalog is every family the binaries that serve /metrics export, by name.
//
// A scrape alone is not enough: a labelled vector (a CounterVec, a
// GaugeVec) prints nothing, not even HELP and TYPE, until its first child
// exists, so a freshly started service shows no
// concord_consumer_events_total or concord_saga_failed_total. The catalog
// therefore joins three sources, each holding to what a binary exports:
//
//   - every binary's scrape, as startEveryBinary takes it;
//   - the client_golang constructors in the Go source of the repository's
//     packages those binaries link (prometheus.NewCounterVec(
//     prometheus.CounterOpts{Name: "…"}, []string{…}) and the like): what the
//     binary registers, with its type and label names;
//   - the series tables of relay/README.md and consumers/README.md, which
//     their own tests compare with a running relay's and consumer's
//     /metrics, for the franz-go (kprom) families that show up only once a
//     broker connection failed or a record was produced.
type catalog map[string]*family

func (c catalog) add(name, typ string, lbls []string, from string) {
	f := c[name]
	if f == nil {
		f = &family{typ: typ}
		c[name] = f
	}
	if f.typ == "" || f.typ == "untyped" {
		f.typ = typ
	}
	if lbls != nil {
		if f.labels == nil {
			f.labels = map[string]bool{}
		}
		for _, l := range lbls {
			f.labels[l] = true
		}
	}
	if !slices.Contains(f.from, from) {
		f.from = append(f.from, from)
	}
}

// fleet keeps the scrapes of the last complete start of every binary:
// starting them takes a minute of a small machine, and the tests of the
// dashboards and the alert rules need only what /metrics answered.
var fleet struct {
	sync.Mutex
	scrapes map[string]testkit.Metrics
}

// scrapeSet gathers one start's scrapes, one per binary.
type scrapeSet struct {
	mu   sync.Mutex
	want int
	got  map[string]testkit.Metrics
}

func newScrapeSet(bins []binary) *scrapeSet {
	return &scrapeSet{want: len(bins), got: map[string]testkit.Metrics{}}
}

func (s *scrapeSet) add(name string, m testkit.Metrics) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got[name] = m
}

// keepIfComplete hands the scrapes to fleet when every binary answered.
func (s *scrapeSet) keepIfComplete() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.got) == s.want {
		fleet.Lock()
		fleet.scrapes = s.got
		fleet.Unlock()
	}
}

// exportedSeries is the catalog of what every binary exports; it starts
// every binary unless a test of this run already did.
func exportedSeries(t *testing.T) catalog {
	t.Helper()
	fleet.Lock()
	scrapes := fleet.scrapes
	fleet.Unlock()
	if scrapes == nil {
		t.Run("start every binary", func(t *testing.T) {
			startEveryBinary(t, func(t *testing.T, _ binary, base string) testkit.Metrics {
				return testkit.Scrape(t, base+"/metrics")
			})
		})
		fleet.Lock()
		scrapes = fleet.scrapes
		fleet.Unlock()
		if scrapes == nil {
			t.Fatal("not every binary could be started and scraped (see the subtests)")
		}
	}
	root := repoRoot(t)
	c := catalog{}
	for bin, m := range scrapes {
		for name, mf := range m {
			var lbls []string
			for _, s := range mf.GetMetric() {
				for _, l := range s.GetLabel() {
					lbls = append(lbls, l.GetName())
				}
			}
			c.add(name, strings.ToLower(mf.GetType().String()), lbls, bin+" /metrics")
		}
	}
	declared(t, root, discover(t, root), c)
	for _, readme := range []string{"relay/README.md", "consumers/README.md"} {
		seriesTable(t, root, readme, c)
	}
	return c
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// constructors are client_golang's constructors whose first argument is
// the family's options, by the type they make.
var constructors = map[string]string{
	"NewCounter": "counter", "NewCounterVec": "counter", "NewCounterFunc": "counter",
	"NewGauge": "gauge", "NewGaugeVec": "gauge", "NewGaugeFunc": "gauge",
	"NewHistogram": "histogram", "NewHistogramVec": "histogram",
	"NewSummary": "summary", "NewSummaryVec": "summary",
}

// declared adds the families the repository's packages linked into bins
// construct. A name that is not a string literal (or Namespace, Subsystem
// and Name literals) cannot be read here and is left to the scrapes.
func declared(t *testing.T, root string, bins []binary, c catalog) {
	t.Helper()
	args := []string{"list", "-e", "-deps", "-f", "{{.ImportPath}}|{{.Dir}}|{{join .GoFiles \",\"}}"}
	for _, b := range bins {
		args = append(args, b.pkg)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	fset := token.NewFileSet()
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.SplitN(line, "|", 3)
		if len(f) != 3 || !strings.HasPrefix(f[0], modulePrefix) || f[2] == "" {
			continue
		}
		for _, file := range strings.Split(f[2], ",") {
			path := filepath.Join(f[1], file)
			src, err := os.ReadFile(path)
			if err != nil || !strings.Contains(string(src), "prometheus.New") {
				continue
			}
			af, err := parser.ParseFile(fset, path, src, 0)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			rel, _ := filepath.Rel(root, path)
			ast.Inspect(af, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) == 0 {
					return true
				}
				typ, ok := constructors[selectorOf(call.Fun, "prometheus")]
				if !ok {
					return true
				}
				name, ok := optsName(call.Args[0])
				if !ok {
					return true
				}
				var lbls []string
				if strings.HasSuffix(selectorOf(call.Fun, "prometheus"), "Vec") {
					if len(call.Args) < 2 {
						return true
					}
					if lbls, ok = stringList(call.Args[1]); !ok {
						lbls = nil // not a literal: labels unknown
					}
				} else {
					lbls = []string{}
				}
				c.add(name, typ, lbls, rel)
				return true
			})
		}
	}
}

// selectorOf is Sel of pkg.Sel, or "".
func selectorOf(e ast.Expr, pkg string) string {
	s, ok := e.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	if id, ok := s.X.(*ast.Ident); ok && id.Name == pkg {
		return s.Sel.Name
	}
	return ""
}

// optsName is the full name of a prometheus.…Opts literal.
func optsName(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.CompositeLit)
	if !ok || !strings.HasSuffix(selectorOf(lit.Type, "prometheus"), "Opts") {
		return "", false
	}
	parts := map[string]string{}
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		key, ok := kv.Key.(*ast.Ident)
		if !ok || (key.Name != "Namespace" && key.Name != "Subsystem" && key.Name != "Name") {
			continue
		}
		s, ok := stringLit(kv.Value)
		if !ok {
			return "", false
		}
		parts[key.Name] = s
	}
	if parts["Name"] == "" {
		return "", false
	}
	var name []string
	for _, k := range []string{"Namespace", "Subsystem", "Name"} {
		if parts[k] != "" {
			name = append(name, parts[k])
		}
	}
	return strings.Join(name, "_"), true
}

func stringLit(e ast.Expr) (string, bool) {
	b, ok := e.(*ast.BasicLit)
	if !ok || b.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(b.Value)
	return s, err == nil
}

func stringList(e ast.Expr) ([]string, bool) {
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil, false
	}
	out := []string{}
	for _, el := range lit.Elts {
		s, ok := stringLit(el)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// seriesTable adds the rows of a README's series table:
// | `name` | type | `label`, `label` | meaning |
func seriesTable(t *testing.T, root, readme string, c catalog) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, readme))
	if err != nil {
		t.Fatal(err)
	}
	backquoted := regexp.MustCompile("`([^`]+)`")
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`concord_") {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		lbls := []string{}
		for _, m := range backquoted.FindAllStringSubmatch(cells[3], -1) {
			lbls = append(lbls, m[1])
		}
		c.add(name, strings.TrimSpace(cells[2]), lbls, readme)
		n++
	}
	if n == 0 {
		t.Fatalf("%s: no series table (rows | `concord_…` | type | labels | meaning |)", readme)
	}
}

// targetLabels are the labels Prometheus adds to every series it scrapes.
var targetLabels = map[string]bool{"job": true, "instance": true}

// lookup finds the family a series name belongs to: the family itself, or
// a histogram's _bucket, _sum and _count and a summary's _sum and _count.
// extra are the labels the suffix adds.
func (c catalog) lookup(name string) (f *family, extra []string) {
	if f := c[name]; f != nil {
		if f.typ == "summary" {
			return f, []string{"quantile"}
		}
		return f, nil
	}
	for _, s := range []struct {
		suffix string
		types  []string
		extra  []string
	}{
		{"_bucket", []string{"histogram"}, []string{"le"}},
		{"_sum", []string{"histogram", "summary"}, nil},
		{"_count", []string{"histogram", "summary"}, nil},
	} {
		base, ok := strings.CutSuffix(name, s.suffix)
		if f := c[base]; ok && f != nil && slices.Contains(s.types, f.typ) {
			return f, s.extra
		}
	}
	return nil, nil
}

// plainNames matches a regular expression that is only alternatives of
// metric names (a|b|c).
var plainNames = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*(\|[a-zA-Z_:][a-zA-Z0-9_:]*)*$`)

// check parses a PromQL expression with Prometheus' own parser and returns
// a problem for every selector that names a series, or matches on a label,
// that no binary exports.
func (c catalog) check(expr string) []string {
	e, err := promql.NewParser(promql.Options{}).ParseExpr(expr)
	if err != nil {
		return []string{"does not parse: " + err.Error()}
	}
	var problems []string
	promql.Inspect(e, func(n promql.Node, _ []promql.Node) error {
		vs, ok := n.(*promql.VectorSelector)
		if !ok {
			return nil
		}
		var names []string
		if vs.Name != "" {
			names = []string{vs.Name}
		}
		for _, m := range vs.LabelMatchers {
			if m.Name != labels.MetricName {
				continue
			}
			switch {
			case m.Type == labels.MatchEqual:
				names = append(names, m.Value)
			case m.Type == labels.MatchRegexp && plainNames.MatchString(m.Value):
				names = append(names, strings.Split(m.Value, "|")...)
			case m.Type == labels.MatchRegexp:
				var any bool
				for name := range c {
					any = any || m.Matches(name)
				}
				if !any {
					problems = append(problems, vs.String()+": no exported series matches "+m.String())
				}
			}
		}
		for _, name := range slices.Compact(slices.Sorted(slices.Values(names))) {
			f, extra := c.lookup(name)
			if f == nil {
				problems = append(problems, "unknown series "+name+" (no binary exports it)")
				continue
			}
			if f.labels == nil {
				continue
			}
			for _, m := range vs.LabelMatchers {
				if m.Name == labels.MetricName || targetLabels[m.Name] || f.labels[m.Name] || slices.Contains(extra, m.Name) {
					continue
				}
				have := make([]string, 0, len(f.labels))
				for l := range f.labels {
					have = append(have, l)
				}
				sort.Strings(have)
				problems = append(problems, "series "+name+" has no label "+strconv.Quote(m.Name)+
					" (its labels: "+strings.Join(have, ", ")+"; from "+strings.Join(f.from, ", ")+")")
			}
		}
		return nil
	})
	return problems
}
