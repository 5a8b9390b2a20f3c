package main

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// pinTestEnv makes TestPinProcess's child process pin itself and check.
const pinTestEnv = "RELAY_BENCH_PIN_TEST"

// TestPinProcess: after pinProcess(cpu), every thread of the process runs
// only on cpu, and so does a thread started after it. It runs in a child
// process, so that this test binary is not pinned.
func TestPinProcess(t *testing.T) {
	if os.Getenv(pinTestEnv) != "" {
		pinChild(t)
		return
	}
	if cpus() < 2 {
		t.Skip("pinning is seen only with two CPUs or more")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPinProcess$", "-test.v")
	cmd.Env = append(os.Environ(), pinTestEnv+"=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func pinChild(t *testing.T) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	cpu := -1
	for c := 0; c < 8*len(all); c++ { // the last CPU this process may use
		if all.IsSet(c) {
			cpu = c
		}
	}
	if err := pinProcess(cpu); err != nil {
		t.Fatal(err)
	}
	// A thread started after the pin: a goroutine locked to a thread of
	// its own while the main goroutine holds another (the process exits
	// with both).
	runtime.LockOSThread()
	started := make(chan int)
	go func() {
		runtime.LockOSThread()
		started <- unix.Gettid()
		select {}
	}()
	newTid := <-started
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	sawNew := false
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		sawNew = sawNew || tid == newTid
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &set); err != nil {
			continue // the thread has exited
		}
		if set.Count() != 1 || !set.IsSet(cpu) {
			t.Errorf("thread %d may run on %d CPUs, CPU %d: %v", tid, set.Count(), cpu, set.IsSet(cpu))
		}
	}
	if !sawNew {
		t.Errorf("thread %d, started after the pin, not among the process's", newTid)
	}
	if err := pinProcess(-1); err == nil {
		t.Error("pinned to CPU -1")
	}
}
