// Package cliwalk holds the test that builds every binary of the
// repository (every main package: */cmd/*, the test helpers, the
// examples) and walks its command line: every
// command and subcommand its --help lists answers --help and --version,
// lists each flag with its CONCORD_ variable, refuses an unknown flag with
// exit status 2, and takes flags after positional arguments.
package cliwalk
