//go:build !linux

package vtool

// noCore does nothing where vtool cannot run (it is built for Linux only).
func noCore(pid int) error { return nil }
