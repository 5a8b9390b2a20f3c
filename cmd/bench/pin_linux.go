package main

import (
	"fmt"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pinProcess binds every thread of this process, and so every thread it
// starts later (a thread inherits its creator's mask), to CPU cpu.
func pinProcess(cpu int) error {
	if cpu < 0 || cpu >= 8*int(unsafe.Sizeof(unix.CPUSet{})) {
		return fmt.Errorf("no CPU %d", cpu)
	}
	var set unix.CPUSet
	set.Set(cpu)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("pin thread %d to CPU %d: %w", tid, cpu, err)
		}
	}
	return nil
}

// cpus returns how many CPUs this process may run on.
func cpus() int {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) != nil {
		return 1
	}
	return set.Count()
}

// pause stops the child's every thread (SIGSTOP) until resume.
func (c *child) pause() { _ = unix.Kill(c.cmd.Process.Pid, unix.SIGSTOP) }

// resume continues a paused child (SIGCONT).
func (c *child) resume() { _ = unix.Kill(c.cmd.Process.Pid, unix.SIGCONT) }

// canPause reports whether children can be paused (measureTogether).
const canPause = true
