package main

import (
	"os"
	"path/filepath"

	"github.com/concordhq/concord/infra/testkit/proc"
)

// start runs binDir/name with env and args, its output in logDir/name.log
// (a fresh log per demo run).
func start(binDir, logDir, name string, env []string, args ...string) (*proc.Process, error) {
	logPath := filepath.Join(logDir, name+".log")
	if err := os.Remove(logPath); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	return proc.Run(proc.Command{Name: name, Path: filepath.Join(binDir, name), Args: args, Env: env, Log: logPath})
}
