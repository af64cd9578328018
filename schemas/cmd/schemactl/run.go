package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/concordhq/concord/infra/kit"
)

// Exit codes.
const (
	exitOK           = 0
	exitIncompatible = 1 // a problem was found: lint failure or incompatible change
	exitFailure      = 1 // the work failed: an unreadable file, an unreachable registry
	exitUsage        = 2 // bad flags, arguments or environment
)

const usage = `schemactl reviews Concord's event schemas (schemas/events).

Usage:
  schemactl lint     [--dir DIR] [--format F]
  schemactl check    --base GIT_REF [--dir DIR] [--format F]
  schemactl diff     [--mode MODE] [--format F] OLD NEW
  schemactl register --registry URL [--dry-run] [--dir DIR] [--format F]
  schemactl get      --registry URL [--deleted] [--format F] SUBJECT [VERSION|latest]
  schemactl list     --registry URL [--deleted] [--prefix P] [--format F] [SUBJECT]
  schemactl delete   --registry URL [--permanent] [--format F] SUBJECT [VERSION|latest]

lint      every schema compiles (JSON Schema 2020-12, Avro), event_type and
          event_version constants match the path, versions are contiguous,
          every example validates (and round-trips through Avro when the type
          is Avro-encoded), catalog entries are consistent.
check     compares the working tree with GIT_REF: a released version file
          (present at GIT_REF) must keep its meaning — whitespace and key order
          may change, nothing else; add v<N+1> instead. Each new version is
          compared with earlier ones under the type's compatibility mode from
          events/catalog.json, with Confluent Schema Registry's meanings:
            BACKWARD            new reads data of the latest earlier version
            BACKWARD_TRANSITIVE new reads data of every earlier version
            FORWARD(_TRANSITIVE) the latest (every) earlier version reads new data
            FULL(_TRANSITIVE)   both
            NONE                no check
          When the mode promises BACKWARD, examples of the earlier versions
          must validate under the new one. An empty --base ("") means there is
          no base (first commit, shallow clone): nothing is compared.
diff      lists every change from OLD to NEW (.avsc is Avro, anything else
          JSON Schema) with its rule and class, and exits 1 when NEW is
          incompatible with OLD under MODE (default BACKWARD).
register  pushes each subject's versions, oldest first, to a Confluent-
          compatible registry with franz-go's pkg/sr: sets the subject's
          compatibility level, checks compatibility, then registers. Each
          catalog entry's subject_strategy names its subject as Confluent's
          serializers do: TopicNameStrategy <topic>-value (the default),
          RecordNameStrategy <record name>, TopicRecordNameStrategy
          <topic>-<record name>; the record name is the JSON Schema's title
          (the Avro twin's full name). --dry-run only checks and prints the
          plan.
get       prints one version of a subject (the latest by default) with its
          id and type; --deleted finds soft-deleted versions too.
list      prints the subjects (--prefix filters them), or the versions of
          SUBJECT; --deleted includes soft-deleted ones.
delete    soft-deletes a subject or one version (the registry hides it; its
          ids still resolve); --permanent deletes it for good, soft-deleting
          first as the registry requires. A subject or version that does not
          exist exits 1.

Registry connection (register, get, list, delete):
  --registry URL             env SCHEMA_REGISTRY_URL
  --registry-user USER       basic authentication, env CONCORD_SCHEMA_REGISTRY_USER
  --registry-password PASS   env CONCORD_SCHEMA_REGISTRY_PASSWORD (prefer it to the flag)
  --registry-token TOKEN     bearer authentication, env CONCORD_SCHEMA_REGISTRY_TOKEN
  --registry-ca-file FILE    PEM CAs for the registry's certificate, env CONCORD_SCHEMA_REGISTRY_CA_FILE
  --registry-cert-file FILE  PEM client certificate (mutual TLS), env CONCORD_SCHEMA_REGISTRY_CERT_FILE
  --registry-key-file FILE   its PEM key, env CONCORD_SCHEMA_REGISTRY_KEY_FILE
  --timeout DURATION         time limit for the requests (register: 1m, others: 30s)

Output: one line per problem — file: pointer: RULE: old → new (hint).
  --format text (default), json (one JSON object per line, on every
  command), or github (lint, check, diff: GitHub Actions ::error
  annotations).
Exit status: 0 clean, 1 a problem or incompatible change, 2 usage error.
`

// usageError marks errors that exit 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// run is the whole command; main only wires it to the process.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	var err error
	var problems int
	switch args[0] {
	case "-h", "--help", "-help", "help":
		fmt.Fprint(stdout, usage)
		fmt.Fprint(stdout, "\nCommands (run \"schemactl COMMAND --help\" for its flags):\n"+commands+
			"\nFlags:\n  --version\n        print the version, commit and build time, then exit\n  --help\n        print this help, then exit\n")
		return exitOK
	case "--version", "-version":
		fmt.Fprintln(stdout, kit.VersionLine("schemactl"))
		return exitOK
	case "lint":
		problems, err = runLint(args[1:], stdout, stderr)
	case "check":
		problems, err = runCheck(args[1:], stdout, stderr)
	case "diff":
		problems, err = runDiff(args[1:], stdout, stderr)
	case "register":
		problems, err = runRegister(args[1:], stdout, stderr)
	case "get":
		problems, err = runGet(args[1:], stdout, stderr)
	case "list":
		problems, err = runList(args[1:], stdout, stderr)
	case "delete":
		problems, err = runDelete(args[1:], stdout, stderr)
	default:
		err = usagef("unknown command %q", args[0])
	}
	var ue usageError
	switch {
	case errors.Is(err, flag.ErrHelp), errors.Is(err, kit.ErrVersion):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "schemactl: %v\nRun schemactl --help for usage.\n", err)
		return exitUsage
	case err != nil:
		fmt.Fprintf(stderr, "schemactl: %v\n", err)
		return exitFailure
	case problems > 0:
		return exitIncompatible
	}
	return exitOK
}

// newFlags returns a flag set whose errors are returned, not printed and
// exited on, and whose help is the command's.
func newFlags(name string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("schemactl "+name, flag.ContinueOnError)
	fs.SetOutput(stdout)
	return fs
}

// commands are listed by --help, one "  name  summary" line each.
const commands = `  lint      check the schema tree
  check     compare the tree with a git revision under each subject's mode
  diff      list every change from OLD to NEW and judge it under --mode
  register  push the subjects to a Confluent-compatible schema registry
`

// parse parses flags with the conventions of every Concord binary (flags
// before or after arguments, CONCORD_ variables, --help, --version),
// turning flag errors into usage errors.
func parse(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	k := kit.Adopt(fs, usage)
	k.SetUsage(fs.Name() + " [flags] [arguments]")
	k.SetOutput(out)
	if err := k.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) || errors.Is(err, kit.ErrVersion) {
			return err
		}
		return usageError{err}
	}
	return nil
}

// addDirFlag registers --dir, which lint, check and register share.
func addDirFlag(fl *flag.FlagSet) *string {
	return fl.String("dir", "", "the schemas module directory (default: . or ./schemas)")
}

// moduleDir finds the schemas module directory: --dir when given, else the
// current directory when it holds events/catalog.json, else ./schemas.
func moduleDir(dir string) (string, error) {
	if dir == "" {
		dir = "."
		if _, err := os.Stat(filepath.Join(dir, "events", "catalog.json")); err != nil {
			dir = "schemas"
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "events", "catalog.json")); err != nil {
		return "", usagef("%s/events/catalog.json not found; run in the schemas module or pass --dir", dir)
	}
	return dir, nil
}
