// Command contractgen writes package contract (schemas/contract) from the
// event catalog: one constant per event type, one struct per (type, version)
// with the schema's data fields, typed enums, and the Avro twin where the
// type is Avro-encoded. go generate runs it; `contractgen -check` (make lint)
// fails when the checked-in file differs from what it would write.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/schemas"
)

func main() {
	fs := kit.NewFlagSet("contractgen", "contractgen generates the typed event contract (schemas/contract) from schemas/events.")
	fs.SetUsage("contractgen [--check] [--out FILE]")
	out := fs.String("out", "", "contract_gen.go", "file to write")
	check := fs.Bool("check", "", false, "compare with --out instead of writing it; exit 1 when stale")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) || errors.Is(err, kit.ErrVersion) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "contractgen: %v (see --help)\n", err)
		os.Exit(2)
	}
	cat, err := schemas.Default()
	if err != nil {
		fail(err)
	}
	src, err := Generate(cat)
	if err != nil {
		fail(err)
	}
	if *check {
		have, err := os.ReadFile(*out)
		if err != nil {
			fail(err)
		}
		if !bytes.Equal(have, src) {
			fail(fmt.Errorf("%s is stale: run `go generate ./schemas/...` and commit the result", *out))
		}
		return
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "contractgen:", err)
	os.Exit(1)
}
