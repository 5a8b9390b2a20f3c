// Package transporttest holds the transport's test doubles and test helpers
// shared by the relay's packages: MemNetwork, an in-memory network of
// transport.Conns with loss, delay, firewalls and pinholes; NewPipe, a
// fronted ship's device; and CheckGoroutineLeaks. Only tests import it
// (relay/route's TestInternalSplit checks that no other package does).
package transporttest

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

const (
	// LeakCheckTimeout is how long CheckGoroutineLeaks waits for
	// goroutines started during a test to exit. Goroutine teardown after
	// Close runs in real time (a woken reader must be scheduled), so this
	// is a bound, not a sleep: the check returns as soon as none are left.
	LeakCheckTimeout = time.Second

	// leakPollInterval is the pause between goroutine snapshots while
	// waiting.
	leakPollInterval = 5 * time.Millisecond
)

// benignGoroutines are substrings of stacks that belong to the runtime or
// the testing framework rather than to the code under test, and may be
// started lazily during any test.
var benignGoroutines = []string{
	"os/signal.signal_recv", // started on first signal.Notify
	"os/signal.loop",
	"runtime.ensureSigM",
}

// CheckGoroutineLeaks records the goroutines running now and registers a
// t.Cleanup that fails the test if goroutines started since are still
// running after up to LeakCheckTimeout, printing their stacks. Call it
// first in a test, before anything that starts goroutines, so that it
// runs after the cleanups registered later (cleanups run last in, first
// out) and so sees their Close calls. It checks nothing if the test has
// already failed, and it does not work in parallel tests (t.Parallel),
// whose neighbours' goroutines would be blamed.
func CheckGoroutineLeaks(t testing.TB) {
	t.Helper()
	checkGoroutineLeaks(t, LeakCheckTimeout)
}

func checkGoroutineLeaks(t testing.TB, timeout time.Duration) {
	before := goroutineIDs(snapshot())
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		deadline := time.Now().Add(timeout)
		for {
			leaked := newGoroutines(before, snapshot())
			if len(leaked) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("%d goroutine(s) leaked (still running %v after the test):\n\n%s",
					len(leaked), timeout, strings.Join(leaked, "\n\n"))
				return
			}
			time.Sleep(leakPollInterval)
		}
	})
}

// snapshot returns the stacks of all goroutines, one per element.
func snapshot() []string {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var stacks []string
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if s := strings.TrimSpace(string(g)); s != "" {
			stacks = append(stacks, s)
		}
	}
	return stacks
}

// goroutineID returns the id from a stack's header line
// "goroutine 42 [running]:", or "" if there is none.
func goroutineID(stack string) string {
	var id uint64
	if _, err := fmt.Sscanf(stack, "goroutine %d ", &id); err != nil {
		return ""
	}
	return fmt.Sprint(id)
}

func goroutineIDs(stacks []string) map[string]bool {
	ids := make(map[string]bool, len(stacks))
	for _, s := range stacks {
		ids[goroutineID(s)] = true
	}
	return ids
}

// newGoroutines returns the stacks in now whose goroutines were not
// running before, leaving out benign ones.
func newGoroutines(before map[string]bool, now []string) []string {
	var leaked []string
	for _, s := range now {
		if before[goroutineID(s)] || isBenign(s) {
			continue
		}
		leaked = append(leaked, s)
	}
	return leaked
}

func isBenign(stack string) bool {
	for _, b := range benignGoroutines {
		if strings.Contains(stack, b) {
			return true
		}
	}
	return false
}
