//go:build !linux

package vtool

// noCore does nothing where vtool cannot run (it is built for Linux only).
func noCore(pid int) error { return nil }

// lockFile does nothing where vtool cannot run: nothing is built there.
func lockFile(path string) (unlock func(), err error) { return func() {}, nil }
