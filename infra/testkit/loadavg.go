package testkit

import (
	"os"
	"strings"
)

// LoadAverage is the 1, 5 and 15 minute load average (Linux), or
// "unknown": benchmarks print it beside their figures, which move with
// whatever else the machine runs.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
