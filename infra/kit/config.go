package kit

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// FlagSet wraps flag.FlagSet so every flag has an environment fallback that
// --help shows: flag value > environment variable > default.
type FlagSet struct {
	*flag.FlagSet
	envErrs []error
}

// NewFlagSet returns a FlagSet whose usage starts with the given summary.
func NewFlagSet(name, summary string) *FlagSet {
	fs := &FlagSet{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError)}
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "%s\n\nUsage: %s [flags]\n\nFlags (environment variable in brackets):\n", summary, name)
		fs.PrintDefaults()
	}
	return fs
}

func (fs *FlagSet) env(env string) (string, bool) {
	if env == "" {
		return "", false
	}
	v, ok := os.LookupEnv(env)
	return v, ok && v != ""
}

func envUsage(usage, env string) string {
	if env == "" {
		return usage
	}
	return usage + " [" + env + "]"
}

// String defines a string flag with an environment fallback.
func (fs *FlagSet) String(name, env, def, usage string) *string {
	if v, ok := fs.env(env); ok {
		def = v
	}
	return fs.FlagSet.String(name, def, envUsage(usage, env))
}

// Int defines an int flag with an environment fallback.
func (fs *FlagSet) Int(name, env string, def int, usage string) *int {
	if v, ok := fs.env(env); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			fs.envErrs = append(fs.envErrs, fmt.Errorf("%s=%q: not an integer", env, v))
		} else {
			def = n
		}
	}
	return fs.FlagSet.Int(name, def, envUsage(usage, env))
}

// Bool defines a bool flag with an environment fallback.
func (fs *FlagSet) Bool(name, env string, def bool, usage string) *bool {
	if v, ok := fs.env(env); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			fs.envErrs = append(fs.envErrs, fmt.Errorf("%s=%q: not a boolean", env, v))
		} else {
			def = b
		}
	}
	return fs.FlagSet.Bool(name, def, envUsage(usage, env))
}

// Duration defines a duration flag with an environment fallback.
func (fs *FlagSet) Duration(name, env string, def time.Duration, usage string) *time.Duration {
	if v, ok := fs.env(env); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			fs.envErrs = append(fs.envErrs, fmt.Errorf("%s=%q: not a duration", env, v))
		} else {
			def = d
		}
	}
	return fs.FlagSet.Duration(name, def, envUsage(usage, env))
}

// Float defines a float64 flag with an environment fallback.
func (fs *FlagSet) Float(name, env string, def float64, usage string) *float64 {
	if v, ok := fs.env(env); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			fs.envErrs = append(fs.envErrs, fmt.Errorf("%s=%q: not a number", env, v))
		} else {
			def = f
		}
	}
	return fs.FlagSet.Float64(name, def, envUsage(usage, env))
}

// Parse parses args; it returns flag.ErrHelp for --help, and a UsageError
// (Main exits 2) for a bad flag or a malformed environment value, naming
// the variable.
func (fs *FlagSet) Parse(args []string) error {
	if err := fs.FlagSet.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return UsageError{Err: err}
	}
	if len(fs.envErrs) > 0 {
		return UsageError{Err: fs.envErrs[0]}
	}
	return nil
}

// Require returns an error naming the first of the given flags left empty.
func Require(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if strings.TrimSpace(pairs[i+1]) == "" {
			return fmt.Errorf("--%s is required", pairs[i])
		}
	}
	return nil
}
