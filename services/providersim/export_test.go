package providersim

// HookSnapshotWrites runs before before each snapshot is written, so a test
// can hold one in flight; undo puts the plain writer back. Set it before
// New and undo it after Close.
func HookSnapshotWrites(before func()) (undo func()) {
	writeSnapshotFile = func(dir string, b []byte) error {
		before()
		return writeSnapshot(dir, b)
	}
	return func() { writeSnapshotFile = writeSnapshot }
}
