package kit

import (
	"runtime/debug"
	"testing"
)

func TestBuildComesFromTheStampThenTheLinkerFlags(t *testing.T) {
	info := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	b := buildOf(info, true, "", "", "")
	if b.Version != "devel" || b.Revision != "abc123+dirty" || b.Time != "2026-01-02T03:04:05Z" {
		t.Fatalf("from the stamp: %+v", b)
	}
	b = buildOf(info, true, "v1.2.3", "def456", "2026-02-03T00:00:00Z")
	if b.Version != "v1.2.3" || b.Revision != "def456" || b.Time != "2026-02-03T00:00:00Z" {
		t.Fatalf("-X values must win: %+v", b)
	}
	info.Main.Version = "v0.9.0"
	if b = buildOf(info, true, "", "", ""); b.Version != "v0.9.0" {
		t.Fatalf("a module version (go install …@v0.9.0) is the version: %+v", b)
	}
	if b = buildOf(nil, false, "", "", ""); b.Revision != "unknown" || b.GoVersion == "" {
		t.Fatalf("no build information: %+v", b)
	}
}
