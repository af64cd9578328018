//go:build confluentcorpus

// The corpus is not in this repository (see corpusEnv), so this test is
// built only on request: go test -tags confluentcorpus -run TestConfluentCorpusAgreement ./compat

package compat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// corpusEnv names a directory holding Confluent Schema Registry's JSON
// Schema diff test cases (json-schema-provider/src/test/resources/
// diff-*.json in github.com/confluentinc/schema-registry). Those files are
// under the Confluent Community License, so they are not part of this
// repository; point the variable at a checkout to measure agreement.
const corpusEnv = "CONCORD_CONFLUENT_DIFF_CASES"

type corpusCase struct {
	Description string          `json:"description"`
	Original    json.RawMessage `json:"original_schema"`
	Update      json.RawMessage `json:"update_schema"`
	Changes     []string        `json:"changes"`
	Compatible  bool            `json:"compatible"`
}

var trailingComma = regexp.MustCompile(`,(\s*[}\]])`)

// deliberate lists the corpus cases whose verdict we give differently on
// purpose (schemas/README.md says why), by description.
var deliberate = map[string]string{
	"Detect required array to be changed": "a name without a schema made required is REQUIRED_ATTRIBUTE_ADDED here",
}

// TestConfluentCorpusAgreement runs the engine over Confluent's own diff
// cases and compares the verdict (compatible or not, their BACKWARD
// direction) and the difference types found.
func TestConfluentCorpusAgreement(t *testing.T) {
	dir := os.Getenv(corpusEnv)
	if dir == "" {
		t.Fatalf("%s is not set: point it at a directory of Confluent's diff-*.json", corpusEnv)
	}
	files, err := filepath.Glob(filepath.Join(dir, "diff-*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no diff-*.json in %s: %v", dir, err)
	}
	total, verdicts, rules := 0, 0, 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cases []corpusCase
		if err := json.Unmarshal(trailingComma.ReplaceAll(b, []byte("$1")), &cases); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for i, c := range cases {
			total++
			o, _ := decode(c.Original)
			n, _ := decode(c.Update)
			got, err := diffOnce(o, n)
			if err != nil {
				t.Errorf("%s #%d %s: %v", filepath.Base(f), i, c.Description, err)
				continue
			}
			compatible := true
			var gotRules, wantRules []string
			for _, ch := range got {
				compatible = compatible && !ch.BreaksBackward
				gotRules = append(gotRules, ch.Rule)
			}
			for _, w := range c.Changes {
				r, _, _ := strings.Cut(w, " ")
				wantRules = append(wantRules, r)
			}
			sort.Strings(gotRules)
			sort.Strings(wantRules)
			switch why, known := deliberate[c.Description]; {
			case compatible == c.Compatible:
				verdicts++
			case known:
				t.Logf("%s #%d %q: compatible=%v, Confluent says %v: deliberate: %s", filepath.Base(f), i, c.Description, compatible, c.Compatible, why)
			default:
				t.Errorf("%s #%d %q: compatible=%v, Confluent says %v\n  ours: %v\n  theirs: %v", filepath.Base(f), i, c.Description, compatible, c.Compatible, got, c.Changes)
			}
			if slices.Equal(gotRules, wantRules) {
				rules++
			} else {
				t.Logf("%s #%d %q: rules differ\n  ours: %v\n  theirs: %v", filepath.Base(f), i, c.Description, gotRules, wantRules)
			}
		}
	}
	t.Logf("Confluent corpus: %d cases; verdict agrees on %d (%.1f%%); difference types agree on %d (%.1f%%)",
		total, verdicts, 100*float64(verdicts)/float64(total), rules, 100*float64(rules)/float64(total))
}
