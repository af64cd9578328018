package proc

import "time"

// SetKillWait sets how long Kill waits for the killed processes and
// returns a function that puts the wait back.
func SetKillWait(d time.Duration) (restore func()) {
	old := killWait
	killWait = d
	return func() { killWait = old }
}
