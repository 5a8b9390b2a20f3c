package transporttest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// recordingTB captures what CheckGoroutineLeaks reports instead of failing
// the real test.
type recordingTB struct {
	testing.TB
	cleanups []func()
	errs     []string
}

func (r *recordingTB) Helper()                   {}
func (r *recordingTB) Failed() bool              { return false }
func (r *recordingTB) Cleanup(f func())          { r.cleanups = append(r.cleanups, f) }
func (r *recordingTB) Errorf(f string, a ...any) { r.errs = append(r.errs, fmt.Sprintf(f, a...)) }

func (r *recordingTB) runCleanups() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

const testLeakTimeout = 100 * time.Millisecond

func TestCheckGoroutineLeaksReportsLeak(t *testing.T) {
	rec := &recordingTB{TB: t}
	checkGoroutineLeaks(rec, testLeakTimeout)
	stop := make(chan struct{})
	defer close(stop)
	go leakyGoroutineForTest(stop)
	rec.runCleanups()
	if len(rec.errs) != 1 {
		t.Fatalf("got %d reports, want 1: %q", len(rec.errs), rec.errs)
	}
	if !strings.Contains(rec.errs[0], "leakyGoroutineForTest") {
		t.Errorf("report does not name the leaked goroutine's function:\n%s", rec.errs[0])
	}
}

func leakyGoroutineForTest(stop chan struct{}) { <-stop }

func TestCheckGoroutineLeaksWaitsForExit(t *testing.T) {
	rec := &recordingTB{TB: t}
	checkGoroutineLeaks(rec, LeakCheckTimeout)
	release := make(chan struct{})
	go func() { <-release }()
	// The goroutine is still running when the check starts and exits
	// while it polls.
	time.AfterFunc(20*time.Millisecond, func() { close(release) })
	rec.runCleanups()
	if len(rec.errs) != 0 {
		t.Fatalf("reported a goroutine that exited in time: %q", rec.errs)
	}
}

func TestCheckGoroutineLeaksIgnoresOlderGoroutines(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	go leakyGoroutineForTest(stop) // started before the check
	rec := &recordingTB{TB: t}
	checkGoroutineLeaks(rec, testLeakTimeout)
	rec.runCleanups()
	if len(rec.errs) != 0 {
		t.Fatalf("blamed a goroutine started before the check: %q", rec.errs)
	}
}

func TestCheckGoroutineLeaksClean(t *testing.T) {
	CheckGoroutineLeaks(t)
}
