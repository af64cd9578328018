package kit

import (
	"context"
	"strings"
)

// Command is a verb of a binary: "relay outbox", "reconciler findings list".
type Command struct {
	Name    string
	Summary string
	Run     func(ctx context.Context, args []string) error
}

// Dispatch runs the command args[0] names with the arguments after it.
// --help (or "help") lists the commands; a missing or unknown command is a
// usage error naming the ones there are. fs takes no flags of its own
// beyond --help and --version: each command parses its own.
func (fs *FlagSet) Dispatch(ctx context.Context, args []string, cmds []Command) error {
	fs.StopAtArg = true
	fs.SetUsage(fs.Name() + " COMMAND [arguments] [flags]")
	names := make([]string, len(cmds))
	for i, c := range cmds {
		fs.AddCommand(c.Name, c.Summary)
		names[i] = c.Name
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return Usagef("missing command: want %s", strings.Join(names, ", "))
	}
	verb := fs.Arg(0)
	if verb == "help" {
		fs.PrintHelp()
		return nil
	}
	for _, c := range cmds {
		if c.Name == verb {
			return c.Run(ctx, fs.Args()[1:])
		}
	}
	return Usagef("unknown command %q: want %s", verb, strings.Join(names, ", "))
}
