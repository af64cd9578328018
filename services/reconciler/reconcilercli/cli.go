// Package reconcilercli is the reconciler's command line: the subcommands
// of the reconciler binary, their flags and their printed reports.
//
//	reconciler run                       scan in a loop (plus a scheduled heal), serve /metrics
//	reconciler once                      finish the current cycle and print its summary
//	reconciler status                    lag, cycles, open findings by kind
//	reconciler heal --since T --until T  re-pull provider events for a window
//	reconciler findings list|show ID|resolve ID --note "…"
package reconcilercli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/concordhq/concord/infra/kit"
)

// usage is printed for a missing or unknown command and for --help.
const usage = `usage: reconciler <command> [flags]

commands:
  run        scan every payment in a loop, heal on a schedule, serve /metrics
  once       finish the current cycle, print its summary and exit
  status     reconciliation lag, cycles and open findings by kind
  heal       re-pull the provider's events for --since..--until and repair what was missed
  findings   list | show ID | resolve ID --note "what was done"

Run "reconciler <command> --help" for its flags.`

// Run runs the command line args (without the program name), printing
// reports to out. Mistakes on the command line are kit.UsageErrors.
func Run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return kit.Usagef("no command\n%s", usage)
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run", "once", "status", "heal":
		return runCommand(ctx, cmd, rest, out)
	case "findings":
		return findings(ctx, rest, out)
	case "-h", "--help", "help":
		fmt.Fprintln(out, usage)
		return nil
	}
	return kit.Usagef("unknown command %q\n%s", cmd, usage)
}

// runCommand runs the commands that scan or read the reconciler's state:
// status, once, heal, and run (serve).
func runCommand(ctx context.Context, cmd string, args []string, out io.Writer) error {
	c := flags(cmd)
	if err := c.fs.Parse(args); err != nil {
		return err
	}
	var since, until time.Time
	if cmd == "heal" {
		var err error
		if since, until, err = window(*c.since, *c.until, time.Now()); err != nil {
			return kit.UsageError{Err: err}
		}
	}
	d, err := c.open(ctx, cmd)
	if err != nil {
		return err
	}
	defer d.pool.Close()
	switch cmd {
	case "status":
		st, err := d.store.Status(ctx)
		if err != nil {
			return err
		}
		printStatus(out, st)
		return nil
	case "once":
		s, err := c.scanner(d, nil)
		if err != nil {
			return err
		}
		rep, err := s.RunCycle(ctx)
		printCycle(out, rep)
		return err
	case "heal":
		h, err := c.healer(d, nil)
		if err != nil {
			return err
		}
		rep, err := h.Heal(ctx, since, until)
		printHeal(out, rep)
		return err
	}
	return serve(ctx, c, d)
}
