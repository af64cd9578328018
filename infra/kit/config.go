package kit

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// EnvPrefix starts the environment variable of every flag: --kafka-brokers
// is CONCORD_KAFKA_BROKERS on every binary.
const EnvPrefix = "CONCORD_"

// EnvName is the environment variable of the flag called name.
func EnvName(name string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// ErrVersion is returned by Parse after --version printed the build; Main
// exits 0 for it.
var ErrVersion = errors.New("version printed")

// FlagSet wraps flag.FlagSet so that every binary's command line behaves
// the same way: every flag has the environment variable EnvName(flag)
// (flag value > environment variable > default), older variable names and
// flag names are still read with a deprecation warning, flags may come
// before or after positional arguments, and --help / --version print to
// standard output.
type FlagSet struct {
	*flag.FlagSet
	summary  string
	usage    string
	out      io.Writer // help and --version
	warn     io.Writer // deprecation warnings
	legacy   map[string][]string
	aliases  map[string]string // deprecated flag name → its new name
	commands []CommandHelp
	version  *bool
	// StopAtArg makes Parse stop at the first positional argument, for a
	// command whose first argument is a verb with flags of its own.
	StopAtArg bool
}

// CommandHelp is one verb listed under "Commands:" in --help.
type CommandHelp struct{ Name, Summary string }

// NewFlagSet returns a FlagSet whose help starts with the given summary.
func NewFlagSet(name, summary string) *FlagSet {
	return Adopt(flag.NewFlagSet(name, flag.ContinueOnError), summary)
}

// Adopt gives a flag.FlagSet defined elsewhere the conventions of this
// package: Parse then reads every flag's CONCORD_ variable, takes flags
// after positional arguments, and answers --help and --version.
func Adopt(std *flag.FlagSet, summary string) *FlagSet {
	fs := &FlagSet{
		FlagSet: std,
		summary: summary, usage: std.Name() + " [flags]",
		out: os.Stdout, warn: os.Stderr,
		legacy: map[string][]string{}, aliases: map[string]string{},
	}
	// Parse errors are returned (Main prints them); help is printed by
	// Parse itself to out.
	std.SetOutput(io.Discard)
	std.Usage = func() {}
	std.Init(std.Name(), flag.ContinueOnError)
	if f := std.Lookup("version"); f != nil {
		panic("kit: --version is defined by the kit")
	}
	fs.version = std.Bool("version", false, "print the version, commit and build time, then exit")
	return fs
}

// SetOutput sets where --help and --version print (standard output by
// default).
func (fs *FlagSet) SetOutput(w io.Writer) { fs.out = w }

// SetWarnings sets where deprecation warnings go (standard error by
// default).
func (fs *FlagSet) SetWarnings(w io.Writer) { fs.warn = w }

// Output is where --help and --version print.
func (fs *FlagSet) Output() io.Writer { return fs.out }

// SetUsage replaces the "NAME [flags]" line of --help, e.g. with
// "relay outbox retry ID [flags]".
func (fs *FlagSet) SetUsage(line string) { fs.usage = line }

// AddCommand lists a verb under "Commands:" in --help.
func (fs *FlagSet) AddCommand(name, summary string) {
	fs.commands = append(fs.commands, CommandHelp{name, summary})
}

// register notes env as an older name of the flag's variable.
func (fs *FlagSet) register(name, env string) {
	if env != "" && env != EnvName(name) {
		fs.legacy[name] = append(fs.legacy[name], env)
	}
}

// String defines a string flag. Its environment variable is EnvName(name);
// a different env (an older name) is still read, with a warning.
func (fs *FlagSet) String(name, env, def, usage string) *string {
	fs.register(name, env)
	return fs.FlagSet.String(name, def, usage)
}

// Int defines an int flag; env as for String.
func (fs *FlagSet) Int(name, env string, def int, usage string) *int {
	fs.register(name, env)
	return fs.FlagSet.Int(name, def, usage)
}

// Bool defines a bool flag; env as for String.
func (fs *FlagSet) Bool(name, env string, def bool, usage string) *bool {
	fs.register(name, env)
	return fs.FlagSet.Bool(name, def, usage)
}

// Duration defines a duration flag; env as for String.
func (fs *FlagSet) Duration(name, env string, def time.Duration, usage string) *time.Duration {
	fs.register(name, env)
	return fs.FlagSet.Duration(name, def, usage)
}

// Float defines a float64 flag; env as for String.
func (fs *FlagSet) Float(name, env string, def float64, usage string) *float64 {
	fs.register(name, env)
	return fs.FlagSet.Float64(name, def, usage)
}

// LegacyEnv adds older environment variable names of a flag, read with a
// deprecation warning when CONCORD_… is not set.
func (fs *FlagSet) LegacyEnv(name string, envs ...string) {
	for _, e := range envs {
		fs.register(name, e)
	}
}

// Alias keeps old as a hidden, deprecated name of the flag called name:
// it sets the same value and prints a warning.
func (fs *FlagSet) Alias(old, name string) {
	f := fs.Lookup(name)
	if f == nil {
		panic("kit: alias of undefined flag " + name)
	}
	fs.FlagSet.Var(f.Value, old, "deprecated: use --"+name)
	fs.aliases[old] = name
}

// Parse parses args: flags may come before or after positional arguments
// ("--" ends the flags; with StopAtArg the first positional argument does),
// then every flag not given takes its environment variable. It returns
// flag.ErrHelp after printing --help, ErrVersion after printing --version,
// and a UsageError (Main exits 2) for a bad flag or a malformed environment
// value, naming the variable. fs.Args() are the positional arguments.
func (fs *FlagSet) Parse(args []string) error {
	var pos []string
	rest := args
	for {
		if err := fs.FlagSet.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.PrintHelp()
				return err
			}
			return UsageError{Err: err}
		}
		left := fs.FlagSet.Args()
		consumed := rest[:len(rest)-len(left)]
		if len(left) == 0 || fs.StopAtArg || (len(consumed) > 0 && consumed[len(consumed)-1] == "--") {
			pos = append(pos, left...)
			break
		}
		pos = append(pos, left[0])
		rest = left[1:]
	}
	// Leave the positional arguments in fs.Args().
	if err := fs.FlagSet.Parse(append([]string{"--"}, pos...)); err != nil {
		return UsageError{Err: err}
	}
	if *fs.version {
		fmt.Fprintln(fs.out, VersionLine(fs.Name()))
		return ErrVersion
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		set[f.Name] = true
		if n, ok := fs.aliases[f.Name]; ok {
			fmt.Fprintf(fs.warn, "%s: warning: --%s is deprecated, use --%s\n", fs.Name(), f.Name, n)
		}
	})
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if envErr != nil || f.Name == "version" || fs.aliases[f.Name] != "" {
			return
		}
		env, v, ok := fs.lookupEnv(f.Name)
		if !ok || set[f.Name] {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			envErr = UsageError{Err: fmt.Errorf("%s=%q: %v", env, v, err)}
		}
	})
	return envErr
}

// Given reports whether the flag was set after Parse, on the command line
// or through its environment variable: for a default that depends on
// another flag.
func (fs *FlagSet) Given(name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// lookupEnv finds the flag's value in the environment: CONCORD_… first,
// else an older name, warning about the older name whenever it is set.
func (fs *FlagSet) lookupEnv(name string) (env, v string, ok bool) {
	env = EnvName(name)
	v, ok = os.LookupEnv(env)
	ok = ok && v != ""
	for _, old := range fs.legacy[name] {
		ov, oldSet := os.LookupEnv(old)
		if !oldSet || ov == "" {
			continue
		}
		if ok {
			fmt.Fprintf(fs.warn, "%s: warning: environment variable %s is deprecated and ignored, %s is set\n", fs.Name(), old, env)
			continue
		}
		fmt.Fprintf(fs.warn, "%s: warning: environment variable %s is deprecated, use %s\n", fs.Name(), old, env)
		env, v, ok = old, ov, true
	}
	return env, v, ok
}

// PrintHelp prints the summary, the usage line, the commands and every
// flag with its environment variable.
func (fs *FlagSet) PrintHelp() {
	w := fs.out
	fmt.Fprintf(w, "%s\n\nUsage: %s\n", strings.TrimSpace(fs.summary), fs.usage)
	if len(fs.commands) > 0 {
		fmt.Fprintf(w, "\nCommands (run \"%s COMMAND --help\" for its flags):\n", fs.Name())
		width := 0
		for _, c := range fs.commands {
			width = max(width, len(c.Name))
		}
		for _, c := range fs.commands {
			fmt.Fprintf(w, "  %-*s  %s\n", width, c.Name, c.Summary)
		}
	}
	fmt.Fprintf(w, "\nFlags (environment variable in brackets):\n")
	var flags []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if fs.aliases[f.Name] == "" {
			flags = append(flags, f)
		}
	})
	sort.Slice(flags, func(i, j int) bool { return flags[i].Name < flags[j].Name })
	for _, f := range flags {
		kind, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if kind != "" {
			line += " " + kind
		}
		usage = strings.ReplaceAll(usage, "\n", "\n        ")
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "0s" {
			usage += fmt.Sprintf(" (default %q)", f.DefValue)
		}
		if f.Name == "version" {
			fmt.Fprintf(w, "%s\n        %s\n", line, usage)
			continue
		}
		env := "[" + EnvName(f.Name)
		if old := fs.legacy[f.Name]; len(old) > 0 {
			env += "; deprecated: " + strings.Join(old, ", ")
		}
		fmt.Fprintf(w, "%s\n        %s %s]\n", line, usage, env)
	}
	fmt.Fprintf(w, "  --help\n        print this help, then exit\n")
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
