package kit

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// LogFlags are the logging flags every binary takes.
type LogFlags struct {
	Format *string
	Level  *string
}

// AddLogFlags registers --log-format and --log-level.
func AddLogFlags(fs *FlagSet) LogFlags {
	return LogFlags{
		Format: fs.String("log-format", "LOG_FORMAT", "text", "log format: text or json"),
		Level:  fs.String("log-level", "LOG_LEVEL", "info", "log level: debug, info, warn or error"),
	}
}

// NewLogger builds the slog logger the flags ask for, writing to w.
func (f LogFlags) NewLogger(w io.Writer, service string) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(*f.Level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", *f.Level)
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch strings.ToLower(*f.Format) {
	case "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", *f.Format)
	}
	return slog.New(ContextHandler{h}).With("service", service), nil
}

// Start is the start-up of a long-running binary: the logger the flags ask
// for (an error of theirs is a UsageError) and tracing as the OTEL_*
// variables ask for it (see Trace). Call stop on the way out.
func (f LogFlags) Start(ctx context.Context, w io.Writer, service string) (log *slog.Logger, stop func(), err error) {
	log, err = f.NewLogger(w, service)
	if err != nil {
		return nil, nil, UsageError{Err: err}
	}
	if stop, err = Trace(ctx, service, log); err != nil {
		return nil, nil, err
	}
	return log, stop, nil
}
