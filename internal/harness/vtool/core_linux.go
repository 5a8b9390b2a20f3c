package vtool

import (
	"os"

	"golang.org/x/sys/unix"
)

// noCore sets the process's core-file limit to zero, soft and hard, so that
// vere aborting (a crash a test provokes on purpose) writes no core file.
// vere raises only the soft limit (u3m_init's "moar core"), which cannot pass
// a hard limit of zero. The process has read no input yet when this runs, so
// it cannot have crashed before.
func noCore(pid int) error {
	return unix.Prlimit(pid, unix.RLIMIT_CORE, &unix.Rlimit{}, nil)
}

// lockFile takes an exclusive lock on the file at path (created if need
// be), waiting for another process's build to end; unlock releases it.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
}
