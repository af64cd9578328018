package providersim

// HookSnapshotWrites calls before ahead of every snapshot write, so a test
// can hold one in flight; undo puts the plain writer back. Hook before New
// and undo after Close.
func HookSnapshotWrites(before func()) (undo func()) {
	writeSnapshotFile = func(dir string, b []byte) error {
		before()
		return writeSnapshot(dir, b)
	}
	return func() { writeSnapshotFile = writeSnapshot }
}
