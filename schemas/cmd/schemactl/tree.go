package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// tree is a snapshot of the events directory: paths relative to the
// schemas module ("events/order.created/v1.schema.json") to contents.
type tree map[string][]byte

// versionPath matches a version file and captures type, version and kind.
var versionPath = regexp.MustCompile(`^events/([^/]+)/v([1-9][0-9]*)\.(schema\.json|avsc)$`)

// versionFile is one schema file of one version of one event type.
type versionFile struct {
	path    string
	typ     string
	version int
	avro    bool
}

func parseVersionPath(p string) (versionFile, bool) {
	m := versionPath.FindStringSubmatch(p)
	if m == nil {
		return versionFile{}, false
	}
	v, _ := strconv.Atoi(m[2])
	return versionFile{path: p, typ: m[1], version: v, avro: m[3] == "avsc"}, true
}

// versions lists the version files of the tree, by type, kind and version.
func (t tree) versions() []versionFile {
	var out []versionFile
	for p := range t {
		if vf, ok := parseVersionPath(p); ok {
			out = append(out, vf)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.typ != b.typ {
			return a.typ < b.typ
		}
		if a.avro != b.avro {
			return !a.avro
		}
		return a.version < b.version
	})
	return out
}

// catalogEntry is the raw catalog.json entry, before defaults.
type catalogEntry struct {
	Topic           string `json:"topic"`
	KeyField        string `json:"key_field"`
	Encoding        string `json:"encoding"`
	Compatibility   string `json:"compatibility"`
	SubjectStrategy string `json:"subject_strategy"`
}

// catalog parses events/catalog.json of the tree; a tree without one has
// an empty catalog.
func (t tree) catalog() (map[string]catalogEntry, error) {
	raw, ok := t["events/catalog.json"]
	if !ok {
		return map[string]catalogEntry{}, nil
	}
	var c map[string]catalogEntry
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("events/catalog.json: %w", err)
	}
	for typ, e := range c {
		if e.Encoding == "" {
			e.Encoding = "json"
		}
		if e.Compatibility == "" {
			e.Compatibility = "BACKWARD"
		}
		c[typ] = e
	}
	return c, nil
}

// diskTree reads dir/events from the file system.
func diskTree(dir string) (tree, error) {
	t := tree{}
	err := fs.WalkDir(os.DirFS(dir), "events", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			return err
		}
		t[p] = b
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s/events: %w", dir, err)
	}
	return t, nil
}

// git runs git in dir and returns its standard output.
func git(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// repoPrefix is the path of dir inside its git work tree ("schemas/"), or
// "" with ok false when dir is not in one.
func repoPrefix(dir string) (string, bool) {
	out, err := git(dir, "rev-parse", "--show-prefix")
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(out)), true
}

// gitTree reads dir/events as it was at ref, with git ls-tree and git show.
func gitTree(dir, ref string) (tree, error) {
	if _, err := git(dir, "rev-parse", "--verify", "--quiet", ref+"^{commit}"); err != nil {
		return nil, usagef("base %q is not a commit in this repository (in a shallow clone, fetch more history or pass --base \"\"): %w", ref, err)
	}
	prefix, _ := repoPrefix(dir)
	out, err := git(dir, "ls-tree", "-r", "--name-only", "--full-tree", ref, "--", prefix+"events")
	if err != nil {
		return nil, err
	}
	t := tree{}
	for _, full := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if full == "" {
			continue
		}
		rel := strings.TrimPrefix(full, prefix)
		if _, isVersion := parseVersionPath(rel); !isVersion && rel != "events/catalog.json" && !strings.Contains(rel, "/examples/") {
			continue
		}
		b, err := git(dir, "show", ref+":"+full)
		if err != nil {
			return nil, err
		}
		t[rel] = b
	}
	return t, nil
}

// displayer turns module-relative paths into the paths reports show:
// relative to the repository root when in git (what CI annotations want),
// else relative to the working directory.
func displayer(dir string) func(string) string {
	if prefix, ok := repoPrefix(dir); ok {
		return func(p string) string { return prefix + p }
	}
	return func(p string) string { return path.Join(filepath.ToSlash(dir), p) }
}
