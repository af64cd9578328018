package kit_test

import (
	"flag"
	"io"
	"log/slog"
)

func flagErrHelp() error          { return flag.ErrHelp }
func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
