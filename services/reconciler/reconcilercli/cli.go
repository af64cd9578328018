// Package reconcilercli is the reconciler's command line: the subcommands
// of the reconciler binary, their flags and their printed reports.
//
//	reconciler run                       scan in a loop (plus a scheduled heal), serve /metrics
//	reconciler once                      finish the current cycle and print its summary
//	reconciler status                    lag, cycles, open findings by kind
//	reconciler heal --since T --until T  re-pull provider events for a window
//	reconciler findings list|show ID|resolve ID --note "…"
//	reconciler broker heal|once|run      the broker rail (funding-svc against the broker)
package reconcilercli

import (
	"context"
	"io"
	"time"

	"github.com/concordhq/concord/infra/kit"
)

const summary = `reconciler compares the payments database with the payment provider, records
every drift once as a finding, and emits repair commands for the drifts that
are safe to heal (payment-svc applies them).`

// Run runs the command line args (without the program name), printing
// reports to out. Mistakes on the command line are kit.UsageErrors.
func Run(ctx context.Context, args []string, out io.Writer) error {
	fs := kit.NewFlagSet("reconciler", summary)
	fs.SetOutput(out)
	cmd := func(name string) func(context.Context, []string) error {
		return func(ctx context.Context, args []string) error { return runCommand(ctx, name, args, out) }
	}
	return fs.Dispatch(ctx, args, []kit.Command{
		{Name: "run", Summary: "scan every payment in a loop, heal on a schedule, serve /metrics", Run: cmd("run")},
		{Name: "once", Summary: "finish the current cycle, print its summary and exit", Run: cmd("once")},
		{Name: "status", Summary: "reconciliation lag, cycles and open findings by kind", Run: cmd("status")},
		{Name: "heal", Summary: "re-pull the provider's events for --since..--until and repair what was missed", Run: cmd("heal")},
		{Name: "broker", Summary: "the broker rail: heal --since T [--until T] | once | run (funding-svc's database against the broker)",
			Run: func(ctx context.Context, args []string) error { return broker(ctx, args, out) }},
		{Name: "findings", Summary: `list | show ID | resolve ID --note "what was done"`,
			Run: func(ctx context.Context, args []string) error { return findings(ctx, args, out) }},
	})
}

// runCommand runs the commands that scan or read the reconciler's state:
// status, once, heal, and run (serve).
func runCommand(ctx context.Context, cmd string, args []string, out io.Writer) error {
	c := flags(cmd, out)
	if err := c.fs.Parse(args); err != nil {
		return err
	}
	if c.fs.NArg() > 0 {
		return kit.Usagef("%s: unexpected argument %q", cmd, c.fs.Arg(0))
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
	defer d.close()
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
