package kit

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Set at link time by `make build`:
//
//	-ldflags "-X github.com/concordhq/concord/infra/kit.version=v1.2.3
//	          -X github.com/concordhq/concord/infra/kit.revision=abc123
//	          -X github.com/concordhq/concord/infra/kit.buildTime=2026-01-02T03:04:05Z"
//
// Left empty, they come from the build information Go stamps into every
// binary built inside the repository (vcs.revision, vcs.time).
var version, revision, buildTime string

// Build describes the running binary.
type Build struct {
	Version   string // release version, or "devel"
	Revision  string // commit, "+dirty" when built from a modified tree
	Time      string // commit time (vcs.time) or the -X build time
	GoVersion string
}

// BuildInfo reads the binary's build: -X values win over the stamped
// build information.
func BuildInfo() Build {
	info, ok := debug.ReadBuildInfo()
	return buildOf(info, ok, version, revision, buildTime)
}

// buildOf decides what BuildInfo reports: the link-time values when set,
// else the stamped build information.
func buildOf(info *debug.BuildInfo, ok bool, version, revision, buildTime string) Build {
	b := Build{Version: "devel", Revision: "unknown", Time: "unknown", GoVersion: runtime.Version()}
	if ok {
		if v := info.Main.Version; v != "" && v != "(devel)" {
			b.Version = v
		}
		dirty := false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.time":
				b.Time = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty && b.Revision != "unknown" {
			b.Revision += "+dirty"
		}
	}
	if version != "" {
		b.Version = version
	}
	if revision != "" {
		b.Revision = revision
	}
	if buildTime != "" {
		b.Time = buildTime
	}
	return b
}

// VersionLine is what --version prints.
func VersionLine(name string) string {
	b := BuildInfo()
	return fmt.Sprintf("%s %s (commit %s, built %s, %s)", name, b.Version, b.Revision, b.Time, b.GoVersion)
}

// RegisterBuildInfo registers concord_build_info{version,revision,goversion}
// = 1, so a dashboard can tell which build every instance runs.
func RegisterBuildInfo(reg prometheus.Registerer) {
	b := BuildInfo()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "concord_build_info",
		Help: "Build of the running binary; always 1.",
	}, []string{"version", "revision", "goversion"})
	g.WithLabelValues(b.Version, b.Revision, b.GoVersion).Set(1)
	reg.MustRegister(g)
}
