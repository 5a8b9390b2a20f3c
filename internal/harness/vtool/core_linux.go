package vtool

import "golang.org/x/sys/unix"

// noCore sets the process's core-file limit to zero, soft and hard, so that
// vere aborting (a crash a test provokes on purpose) writes no core file.
// vere raises only the soft limit (u3m_init's "moar core"), which cannot pass
// a hard limit of zero. The process has read no input yet when this runs, so
// it cannot have crashed before.
func noCore(pid int) error {
	return unix.Prlimit(pid, unix.RLIMIT_CORE, &unix.Rlimit{}, nil)
}
