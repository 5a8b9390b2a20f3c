package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if childMain() {
		return
	}
	os.Exit(m.Run())
}

// TestBenchSmoke runs the baseline and the relay briefly and checks that
// both carry traffic, the relay allocates nothing per datagram, and the
// report is written. It asserts no timing.
func TestBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	cfg := benchConfig{pairs: 1, base: 43000, duration: 300 * time.Millisecond, window: 32, page: 512}
	base, err := measure(cfg, "bare forwarder", "forward", 0, 1, 1, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := measure(cfg, "relay", "relay", 1000, 1, 1, 1, -1)
	if err != nil {
		t.Fatal(err)
	}
	if base.RTPerSec <= 0 || rel.RTPerSec <= 0 {
		t.Fatalf("no traffic: baseline %.0f, relay %.0f round trips/s", base.RTPerSec, rel.RTPerSec)
	}
	if rel.Allocs > 0.01 {
		t.Errorf("relay allocates %.3f times per datagram", rel.Allocs)
	}
	if rel.Answered < 0.99 || len(rel.Lat) == 0 {
		t.Errorf("open loop answered %.2f%% with %d samples", 100*rel.Answered, len(rel.Lat))
	}
	dir := t.TempDir()
	rep := &report{cfg: cfg, results: []*result{base, rel}, halfRate: rel.Rate, when: time.Now()}
	if err := rep.write(filepath.Join(dir, "B.md"), filepath.Join(dir, "plots")); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "B.md"))
	if !strings.Contains(string(md), "| relay |") {
		t.Errorf("report lacks the relay row:\n%s", md)
	}
	for _, f := range []string{"throughput.svg", "latency.svg"} {
		if b, err := os.ReadFile(filepath.Join(dir, "plots", f)); err != nil || !strings.HasPrefix(string(b), "<svg") {
			t.Errorf("plot %s: %v", f, err)
		}
	}
}
