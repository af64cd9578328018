package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// problem is one finding: where, which rule, what changed and what to do.
type problem struct {
	File    string `json:"file"`
	Pointer string `json:"pointer"`
	Rule    string `json:"rule"`
	Old     string `json:"old,omitempty"`
	New     string `json:"new,omitempty"`
	Hint    string `json:"hint,omitempty"`
}

// reporter writes problems in one of the output formats.
type reporter struct {
	w      io.Writer
	format string
	count  int
}

func newReporter(w io.Writer, format string) (*reporter, error) {
	switch format {
	case "text", "json", "github":
		return &reporter{w: w, format: format}, nil
	}
	return nil, usagef("unknown --format %q (want text, json or github)", format)
}

func (r *reporter) report(p problem) {
	r.count++
	ptr := p.Pointer
	if ptr == "" {
		ptr = "/"
	}
	change := ""
	if p.Old != "" || p.New != "" {
		change = orAbsent(p.Old) + " → " + orAbsent(p.New)
	}
	switch r.format {
	case "json":
		b, _ := json.Marshal(p)
		fmt.Fprintln(r.w, string(b))
	case "github":
		msg := ptr + ": " + change
		if p.Hint != "" {
			msg += " — " + p.Hint
		}
		fmt.Fprintf(r.w, "::error file=%s,title=%s::%s\n", ghEscapeProperty(p.File), ghEscapeProperty(p.Rule), ghEscapeData(msg))
	default:
		line := p.File + ": " + ptr + ": " + p.Rule
		if change != "" {
			line += ": " + change
		}
		if p.Hint != "" {
			line += " (" + p.Hint + ")"
		}
		fmt.Fprintln(r.w, line)
	}
}

func orAbsent(s string) string {
	if s == "" {
		return "(absent)"
	}
	return s
}

// GitHub workflow-command escaping.
func ghEscapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

func ghEscapeProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}
