package reconcilercli

import (
	"fmt"
	"time"
)

// window parses --since/--until: RFC 3339 times, or durations back from now.
func window(since, until string, now time.Time) (time.Time, time.Time, error) {
	parse := func(name, v string, def time.Time) (time.Time, error) {
		if v == "" {
			if def.IsZero() {
				return def, fmt.Errorf("--%s is required", name)
			}
			return def, nil
		}
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			return t, nil
		}
		if d, err := time.ParseDuration(v); err == nil && d >= 0 {
			return now.Add(-d), nil
		}
		return time.Time{}, fmt.Errorf("--%s %q: want an RFC 3339 time or a duration back from now", name, v)
	}
	s, err := parse("since", since, time.Time{})
	if err != nil {
		return s, s, err
	}
	u, err := parse("until", until, now)
	if err != nil {
		return s, u, err
	}
	if !u.After(s) {
		return s, u, fmt.Errorf("--until %s is not after --since %s", u.Format(time.RFC3339), s.Format(time.RFC3339))
	}
	return s, u, nil
}
