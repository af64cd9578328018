package metricslint

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	promql "github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// The dashboards the README promises, under deploy/grafana.
var dashboards = []string{"overview", "relay", "consumers", "saga", "reconciler"}

// The alert rules, parsed and validated by Prometheus' own rule parser,
// name only series some binary exports and only labels those series have;
// each alert has a severity and says what it means and what to do. The
// rule files are the ones deploy/prometheus/prometheus.example.yml loads.
func TestAlertRulesNameOnlyExportedSeries(t *testing.T) {
	root := repoRoot(t)
	files := ruleFiles(t, filepath.Join(root, "deploy/prometheus/prometheus.example.yml"))
	c := exportedSeries(t)
	alerts := 0
	for _, file := range files {
		rel, _ := filepath.Rel(root, file)
		groups, errs := rulefmt.ParseFile(file, false, model.UTF8Validation, promql.NewParser(promql.Options{}), slog.New(slog.DiscardHandler))
		for _, err := range errs {
			t.Errorf("%s: %v", rel, err)
		}
		if groups == nil {
			continue
		}
		for _, g := range groups.Groups {
			for _, r := range g.Rules {
				what := rel + ": group " + g.Name + ": " + cmpOr(r.Alert, r.Record)
				for _, p := range c.check(r.Expr) {
					t.Errorf("%s: %s", what, p)
				}
				if r.Alert == "" {
					continue
				}
				alerts++
				if s := r.Labels["severity"]; s != "critical" && s != "warning" {
					t.Errorf("%s: label severity %q, want critical or warning", what, s)
				}
				for _, a := range []string{"summary", "description", "runbook"} {
					if strings.TrimSpace(r.Annotations[a]) == "" {
						t.Errorf("%s: no %s annotation", what, a)
					}
				}
			}
		}
	}
	if alerts == 0 {
		t.Fatalf("no alert rules in %v", files)
	}
}

// ruleFiles are the rule_files of a Prometheus configuration, relative to
// it; each must exist.
func ruleFiles(t *testing.T, config string) []string {
	t.Helper()
	b, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		RuleFiles []string `yaml:"rule_files"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("%s: %v", config, err)
	}
	if len(cfg.RuleFiles) == 0 {
		t.Fatalf("%s lists no rule_files", config)
	}
	var files []string
	for _, f := range cfg.RuleFiles {
		matches, err := filepath.Glob(filepath.Join(filepath.Dir(config), f))
		if err != nil || len(matches) == 0 {
			t.Fatalf("%s: rule_files entry %q matches no file", config, f)
		}
		files = append(files, matches...)
	}
	return files
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// dashboard is the part of Grafana's dashboard JSON model this test reads.
type dashboard struct {
	Inputs []struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		PluginID string `json:"pluginId"`
	} `json:"__inputs"`
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource *datasource     `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Title      string      `json:"title"`
	Type       string      `json:"type"`
	Datasource *datasource `json:"datasource"`
	Targets    []struct {
		Expr       string      `json:"expr"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// The datasource every query names: the DS_PROMETHEUS input Grafana asks
// for on import, which a datasource variable of that name also answers when
// the dashboards are provisioned from files.
var promDatasource = datasource{Type: "prometheus", UID: "${DS_PROMETHEUS}"}

// grafanaVariables are Grafana's template variables in a query:
// $__rate_interval and the other intervals, $name, ${name} and
// ${name:format}.
var (
	grafanaIntervals = regexp.MustCompile(`\$__(rate_interval|interval|range)\b|\$\{__(rate_interval|interval|range)\}`)
	grafanaVariables = regexp.MustCompile(`\$\{[a-zA-Z0-9_]+(:[a-z]+)?\}|\$[a-zA-Z_][a-zA-Z0-9_]*|\[\[[a-zA-Z0-9_]+\]\]`)
	metricName       = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*`)
	labelValues      = regexp.MustCompile(`^\s*label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)
)

// promQL is a dashboard query as Prometheus would get it: intervals become
// a duration, every other variable a value (variables stand for label
// values inside matchers here).
func promQL(q string) string {
	return grafanaVariables.ReplaceAllString(grafanaIntervals.ReplaceAllString(q, "5m"), "value")
}

// Each dashboard under deploy/grafana loads as Grafana's JSON model, asks
// for its Prometheus as the DS_PROMETHEUS input, and queries only series
// some binary exports, with labels they have: every panel's targets and
// every variable's label_values query, parsed with Prometheus' own parser.
func TestDashboardsQueryOnlyExportedSeries(t *testing.T) {
	root := repoRoot(t)
	files, err := filepath.Glob(filepath.Join(root, "deploy/grafana/*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range dashboards {
		if !slices.Contains(files, filepath.Join(root, "deploy/grafana", want+".json")) {
			t.Errorf("deploy/grafana/%s.json is missing", want)
		}
	}
	c := exportedSeries(t)
	uids := map[string]string{}
	for _, file := range files {
		rel, _ := filepath.Rel(root, file)
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		if err := json.Unmarshal(b, &d); err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 {
			t.Errorf("%s: uid %q, title %q, schemaVersion %d: want a uid, a title and schemaVersion ≥ 36", rel, d.UID, d.Title, d.SchemaVersion)
		}
		if other, ok := uids[d.UID]; ok {
			t.Errorf("%s: uid %q is also %s's", rel, d.UID, other)
		}
		uids[d.UID] = rel
		if !slices.ContainsFunc(d.Inputs, func(in struct {
			Name     string `json:"name"`
			Type     string `json:"type"`
			PluginID string `json:"pluginId"`
		}) bool {
			return in.Name == "DS_PROMETHEUS" && in.Type == "datasource" && in.PluginID == "prometheus"
		}) {
			t.Errorf("%s: no __inputs entry DS_PROMETHEUS (a prometheus datasource)", rel)
		}
		queries := 0
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			what := rel + ": variable " + v.Name
			if v.Datasource == nil || *v.Datasource != promDatasource {
				t.Errorf("%s: datasource %+v, want %+v", what, v.Datasource, promDatasource)
			}
			var q string
			if json.Unmarshal(v.Query, &q) != nil {
				var obj struct {
					Query string `json:"query"`
				}
				if err := json.Unmarshal(v.Query, &obj); err != nil {
					t.Errorf("%s: query %s: %v", what, v.Query, err)
					continue
				}
				q = obj.Query
			}
			m := labelValues.FindStringSubmatch(promQL(q))
			if m == nil {
				t.Errorf("%s: query %q: want label_values(series, label)", what, q)
				continue
			}
			for _, p := range c.check(m[1]) {
				t.Errorf("%s: %s", what, p)
			}
			// The label it lists must be one the series has.
			series := metricName.FindString(strings.TrimSpace(m[1]))
			for _, p := range c.check(series + `{` + m[2] + `!=""}`) {
				t.Errorf("%s: %s", what, p)
			}
		}
		var walk func(ps []panel)
		walk = func(ps []panel) {
			for _, p := range ps {
				walk(p.Panels)
				if p.Type == "row" {
					continue
				}
				what := rel + ": panel " + strings.TrimSpace(p.Title)
				if p.Datasource == nil || *p.Datasource != promDatasource {
					t.Errorf("%s: datasource %+v, want %+v", what, p.Datasource, promDatasource)
				}
				if len(p.Targets) == 0 {
					t.Errorf("%s: no queries", what)
				}
				for _, tg := range p.Targets {
					queries++
					if tg.Datasource != nil && *tg.Datasource != promDatasource {
						t.Errorf("%s: target datasource %+v, want %+v", what, tg.Datasource, promDatasource)
					}
					for _, problem := range c.check(promQL(tg.Expr)) {
						t.Errorf("%s: %s\n\tquery: %s", what, problem, tg.Expr)
					}
				}
			}
		}
		walk(d.Panels)
		if queries == 0 {
			t.Errorf("%s: no queries", rel)
		}
	}
}
