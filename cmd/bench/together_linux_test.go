package main

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// procState returns the state letter of process pid (/proc/PID/stat's
// third field): 'T' for stopped.
func procState(t *testing.T, pid int) byte {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	return s[strings.LastIndexByte(s, ')')+2]
}

// waitState waits up to a second for process pid to reach state want
// (signals are delivered asynchronously) and reports whether it did.
func waitState(t *testing.T, pid int, want byte) bool {
	t.Helper()
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if procState(t, pid) == want {
			return true
		}
	}
	return false
}

// TestRotate: rotate gives each child turns in the order given, and after each
// turn, and at the end, every child is stopped, so that no two ever run
// at once; each child used CPU in its turns. Three busy loops that were
// never paused would use two CPUs' worth, so the CPU they used in all is
// also bounded by the rotation's length.
func TestRotate(t *testing.T) {
	var cs []*child
	for range 3 {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		c := &child{cmd: cmd}
		cs = append(cs, c)
		t.Cleanup(func() { c.cmd.Process.Kill(); c.cmd.Wait() })
		c.pause()
	}
	for _, c := range cs {
		if !waitState(t, c.cmd.Process.Pid, 'T') {
			t.Fatalf("child %d not stopped by pause", c.cmd.Process.Pid)
		}
	}
	var u0 [3]time.Duration
	for i, c := range cs {
		u, s := c.cpuTime()
		u0[i] = u + s
	}
	var taken []int
	var turns [3]int
	t0 := time.Now()
	order := []int{2, 0, 1}
	rotate(cs, order, 20*time.Millisecond, 600*time.Millisecond, func(i int, ran time.Duration) {
		taken = append(taken, i)
		turns[i]++
		if ran < 20*time.Millisecond {
			t.Errorf("turn of child %d ran %v, under its slot", i, ran)
		}
		for j, c := range cs {
			if !waitState(t, c.cmd.Process.Pid, 'T') {
				t.Errorf("after child %d's turn, child %d is not stopped", i, j)
			}
		}
	})
	wall := time.Since(t0)
	for k, i := range taken {
		if i != order[k%3] {
			t.Fatalf("turns taken %v, not in the rotation %v", taken, order)
		}
	}
	var used time.Duration
	for i, c := range cs {
		u, s := c.cpuTime()
		d := u + s - u0[i]
		used += d
		if turns[i] == 0 || d <= 0 {
			t.Errorf("child %d: %d turns, %v of CPU", i, turns[i], d)
		}
		if !waitState(t, c.cmd.Process.Pid, 'T') {
			t.Errorf("child %d not left stopped", i)
		}
	}
	// One at a time: at most the wall time, with a tick's rounding each.
	if limit := wall + 3*10*time.Millisecond; used > limit {
		t.Errorf("the children used %v of CPU in %v: more than one ran at a time", used, wall)
	}
	t.Logf("%d turns in %v; CPU used %v", len(taken), wall, used)
}

// TestMeasureTogetherSmoke measures the forwarders and the relay at once
// briefly and checks that each configuration took turns, carried traffic
// in them, and was measured (CPU per datagram). It asserts no timing
// (TestBenchSmoke checks the relay's allocations).
func TestMeasureTogetherSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	cfg := benchConfig{pairs: 2, publishers: 1, base: 45000, duration: 400 * time.Millisecond, window: 16, page: 256}
	res, err := measureTogether(cfg, 2, []scenario{
		{name: "bare forwarder", role: "forward", sockets: 1, procs: 1},
		{name: "forwarder + codec", role: "forward", sockets: 1, procs: 1, variant: "codec"},
		{name: "relay default", role: "relay", sockets: 1, procs: 1, variant: "default"},
	}, 1, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if len(r.Rounds) != 1 {
			t.Fatalf("%s: %d rounds", r.Name, len(r.Rounds))
		}
		rd := r.Rounds[0]
		if rd.turns < 2 || rd.datagrams == 0 || rd.rate <= 0 || rd.user+rd.sys <= 0 {
			t.Errorf("%s: %d turns, %d datagrams, %.0f round trips/s, CPU %v+%v a datagram", r.Name, rd.turns, rd.datagrams, rd.rate, rd.user, rd.sys)
		}
	}
	// Too many configurations for the slot: refused, not measured wrong.
	if _, err := measureTogether(cfg, 2, make([]scenario, 3), 1, maxTurnWait); err == nil {
		t.Error("a turn wait over maxTurnWait was accepted")
	}
	if _, err := measureTogether(cfg, 2, []scenario{{name: "relay", role: "relay", pending: 10, sockets: 1, procs: 1}}, 1, 10*time.Millisecond); err == nil {
		t.Error("a pre-filled table was accepted, and would not have been pre-filled")
	}
}

// TestRotationOrder: forward in even rounds, backward in odd ones, so
// that each configuration's turn follows each neighbour's as often.
func TestRotationOrder(t *testing.T) {
	for _, c := range []struct {
		n, k int
		want []int
	}{{3, 0, []int{0, 1, 2}}, {3, 1, []int{2, 1, 0}}, {4, 2, []int{0, 1, 2, 3}}, {4, 3, []int{3, 2, 1, 0}}} {
		if got := rotationOrder(c.n, c.k); !slices.Equal(got, c.want) {
			t.Errorf("rotationOrder(%d, %d) = %v, want %v", c.n, c.k, got, c.want)
		}
	}
}
