package testkit

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics is one scrape of a /metrics endpoint, by family name.
type Metrics map[string]*dto.MetricFamily

// Scrape reads url (a /metrics endpoint) in the text format.
func Scrape(t testing.TB, url string) Metrics {
	t.Helper()
	m, err := ScrapeErr(url)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// ScrapeErr is Scrape returning its error, for polling.
func ScrapeErr(url string) (Metrics, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("scrape %s: %s: %s", url, resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	return fams, nil
}

// Gather reads g (a registry) as a scrape would, without the HTTP.
func Gather(t testing.TB, g prometheus.Gatherer) Metrics {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	m := Metrics{}
	for _, f := range fams {
		m[f.GetName()] = f
	}
	return m
}

// Value sums the samples of family name whose labels include want:
// counters, gauges and untyped values, or a histogram's count.
func (m Metrics) Value(name string, want map[string]string) float64 {
	mf := m[name]
	sum := 0.0
	if mf == nil {
		return 0
	}
samples:
	for _, s := range mf.GetMetric() {
		have := map[string]string{}
		for _, l := range s.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue samples
			}
		}
		switch {
		case s.Counter != nil:
			sum += s.GetCounter().GetValue()
		case s.Gauge != nil:
			sum += s.GetGauge().GetValue()
		case s.Untyped != nil:
			sum += s.GetUntyped().GetValue()
		case s.Histogram != nil:
			sum += float64(s.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

// Names are the family names scraped, sorted.
func (m Metrics) Names() []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Lint runs promlint over the scrape and returns its problems, one line
// each ("name: problem"), sorted.
func (m Metrics) Lint() ([]string, error) {
	fams := make([]*dto.MetricFamily, 0, len(m))
	for _, n := range m.Names() {
		fams = append(fams, m[n])
	}
	problems, err := promlint.NewWithMetricFamilies(fams).Lint()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(problems))
	for i, p := range problems {
		out[i] = p.Metric + ": " + p.Text
	}
	sort.Strings(out)
	return out, nil
}

// LintClean fails t with every promlint problem of the scrape.
func (m Metrics) LintClean(t testing.TB, what string) {
	t.Helper()
	problems, err := m.Lint()
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("%s: promlint found %d problems:\n%s", what, len(problems), strings.Join(problems, "\n"))
	}
}

// SeriesTable is a README's table of exported series: each row's first
// cell is the backquoted family name; a row whose text says "on error"
// lists a family that appears only once something failed.
type SeriesTable map[string]bool // family → always present

// ReadSeriesTable parses the series table of a README (rows starting with
// "| `concord_").
func ReadSeriesTable(t testing.TB, path string) SeriesTable {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	table := SeriesTable{}
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "| `")
		if !ok {
			continue
		}
		name, _, ok := strings.Cut(rest, "`")
		if !ok || !strings.HasPrefix(name, "concord_") {
			continue
		}
		table[name] = !strings.Contains(rest, "on error")
	}
	if len(table) == 0 {
		t.Fatalf("%s: no series table (rows starting with | `concord_)", path)
	}
	return table
}

// Diff compares the table with a scrape, over the families whose names
// start with one of prefixes: a family exported but not listed, or listed
// as always present but not exported, is a difference.
func (s SeriesTable) Diff(m Metrics, prefixes ...string) []string {
	in := func(name string) bool {
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				return true
			}
		}
		return false
	}
	var diff []string
	for _, n := range m.Names() {
		if _, ok := s[n]; in(n) && !ok {
			diff = append(diff, "exported but not in the README: "+n)
		}
	}
	for n, always := range s {
		if _, ok := m[n]; in(n) && always && !ok {
			diff = append(diff, "in the README but not exported: "+n)
		}
	}
	sort.Strings(diff)
	return diff
}
