// Command schemactl reviews Concord's event schemas: lint checks the tree,
// check compares it with a git revision under each subject's compatibility
// mode, diff compares any two schema files, and register pushes the
// subjects to a Confluent-compatible schema registry. Run schemactl --help.
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }
