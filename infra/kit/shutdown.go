package kit

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// SignalContext is cancelled on SIGINT or SIGTERM. Binaries stop taking new
// work when it is done, drain what is in flight, commit, then exit.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// Main runs a binary's body and turns its error into the exit convention:
// 0 on success, --help or --version, 2 on bad usage (a flag, argument or
// environment value), 1 with a one-line reason otherwise — an unreachable
// broker, database or registry included.
func Main(name string, run func(ctx context.Context, args []string) error) {
	ctx, cancel := SignalContext()
	err := run(ctx, os.Args[1:])
	cancel()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp), errors.Is(err, ErrVersion):
		os.Exit(0)
	case errors.As(err, new(UsageError)):
		fmt.Fprintf(os.Stderr, "%s: %v (see --help)\n", name, err)
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// UsageError marks a bad flag or argument; Main exits 2 for it.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError with a formatted message.
func Usagef(format string, args ...any) error { return UsageError{fmt.Errorf(format, args...)} }
