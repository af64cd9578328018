package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/concordhq/concord/schemas/compat"
)

func runDiff(args []string, stdout, stderr io.Writer) (int, error) {
	fl := newFlags("diff", stdout)
	modeFlag := fl.String("mode", "BACKWARD", "compatibility mode NEW must keep against OLD")
	format := fl.String("format", "text", "output format: text, json or github")
	if err := parse(fl, args); err != nil {
		return 0, err
	}
	if fl.NArg() != 2 {
		return 0, usagef("diff takes two files, OLD and NEW")
	}
	mode, err := compat.ParseMode(*modeFlag)
	if err != nil {
		return 0, usageError{err}
	}
	if *format != "text" && *format != "json" && *format != "github" {
		return 0, usagef("unknown --format %q (want text, json or github)", *format)
	}
	oldPath, newPath := fl.Arg(0), fl.Arg(1)
	f := compat.FormatOf(newPath)
	if compat.FormatOf(oldPath) != f {
		return 0, usagef("%s and %s are not in the same schema language", oldPath, newPath)
	}
	oldB, err := os.ReadFile(oldPath)
	if err != nil {
		return 0, usageError{err}
	}
	newB, err := os.ReadFile(newPath)
	if err != nil {
		return 0, usageError{err}
	}
	changes, err := compat.Diff(f, oldB, newB)
	if err != nil {
		return 0, usageError{err}
	}
	breaking := 0
	for _, c := range changes {
		breaks := mode.Breaks(c)
		if breaks {
			breaking++
		}
		switch *format {
		case "json":
			b, _ := json.Marshal(struct {
				File string `json:"file"`
				compat.Change
				Class  string `json:"class"`
				Breaks bool   `json:"breaks_mode"`
			}{newPath, c, c.Class(), breaks})
			fmt.Fprintln(stdout, string(b))
		case "github":
			if breaks {
				rep := &reporter{w: stdout, format: "github"}
				rep.report(problem{File: newPath, Pointer: c.Pointer, Rule: c.Rule, Old: c.Old, New: c.New, Hint: c.Hint})
			}
		default:
			ptr := c.Pointer
			if ptr == "" {
				ptr = "/"
			}
			mark := ""
			if breaks {
				mark = " BREAKS " + string(mode)
			}
			line := fmt.Sprintf("%s: %s: %s [%s]%s: %s → %s", newPath, ptr, c.Rule, c.Class(), mark, orAbsent(c.Old), orAbsent(c.New))
			if c.Hint != "" && (breaks || c.Class() != "compatible") {
				line += " (" + c.Hint + ")"
			}
			fmt.Fprintln(stdout, line)
		}
	}
	if *format == "text" {
		verdict := "compatible"
		if breaking > 0 {
			verdict = fmt.Sprintf("INCOMPATIBLE (%d breaking)", breaking)
		}
		fmt.Fprintf(stderr, "schemactl diff: %d changes; %s under %s\n", len(changes), verdict, mode)
	}
	return breaking, nil
}
