package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"github.com/urbit-relay/relay/internal/harness/vtool"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/urbit-relay/relay/relay/transport/transporttest"
)

// committedSVG is the diagram the README shows, made by
// `go run ./cmd/relay demo --svg docs/tightening.svg`.
const committedSVG = "../../docs/tightening.svg"

// TestDemo runs `relay demo` as a user would and checks that it shows the
// seed's example: each round's targets and next-hop, by name.
func TestDemo(t *testing.T) {
	transporttest.CheckGoroutineLeaks(t)
	svg := filepath.Join(t.TempDir(), "tightening.svg")
	var stdout, stderr bytes.Buffer
	start := time.Now()
	if code := run([]string{"demo", "--svg", svg}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr.String(), stdout.String())
	}
	t.Logf("demo took %v", time.Since(start))
	out := stdout.String()
	want := []string{
		"round 1 sent to ~syl answered via ~syl, next-hop ~mister-ritpub-sipsyl",
		"round 2 sent to ~mister-ritpub-sipsyl + ~syl answered by ~mister-ritpub-sipsyl directly, no next-hop",
		"round 3 sent to ~mister-ritpub-sipsyl answered by ~mister-ritpub-sipsyl directly, no next-hop",
		"round 4 sent to ~mister-ritpub-sipsyl answered by ~mister-ritpub-sipsyl directly, no next-hop",
		"round 5 sent to ~mister-ritpub-sipsyl answered by ~mister-ritpub-sipsyl directly, no next-hop",
	}
	var rounds []string
	tries := regexp.MustCompile(`\s+\(\d+ tries\)$`)
	for _, line := range strings.Split(out, "\n") {
		f := strings.Join(strings.Fields(line), " ")
		if strings.HasPrefix(f, "round ") {
			rounds = append(rounds, tries.ReplaceAllString(f, ""))
		}
	}
	if strings.Join(rounds, "\n") != strings.Join(want, "\n") {
		t.Errorf("rounds:\n%s\nwant:\n%s\n\nfull output:\n%s", strings.Join(rounds, "\n"), strings.Join(want, "\n"), out)
	}
	for _, s := range []string{
		"~ritpub-sipsyl         planet  relay",
		"~mister-ritpub-sipsyl  moon    publisher",
		"The route went from ~syl to ~mister-ritpub-sipsyl itself in 2 round trips",
		"Relay counters:",
		// The subscription: a signed ack for a value not grown yet, a held
		// heartbeat, and the value arriving in the heartbeat's answer.
		"~mister-ritpub-sipsyl signed the subscription: pending, session",
		"~rovnys sends one heartbeat for all its subscriptions there",
		`delivered  "the first value" arrived`,
		"in the held heartbeat's answer",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	if t.Failed() {
		return // the diagram follows the rounds; no point comparing it
	}

	got, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(got, new(struct{})); err != nil {
		t.Fatalf("SVG is not well-formed XML: %v", err)
	}
	committed, err := os.ReadFile(committedSVG)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, committed) {
		t.Errorf("docs/tightening.svg is stale; regenerate it with: go run ./cmd/relay demo --svg docs/tightening.svg")
	}
}

// TestDemoKeep checks that --keep leaves the network up with working
// metrics listeners, and that it stops when asked.
func TestDemoKeep(t *testing.T) {
	transporttest.CheckGoroutineLeaks(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out vtool.SyncBuffer
	done := make(chan error, 1)
	go func() { done <- demo(ctx, demoOptions{keep: true}, &out) }()
	if err := waitUntil(context.Background(), 20*time.Second, func() bool {
		return strings.Contains(out.String(), "Press Ctrl-C")
	}); err != nil {
		cancel()
		t.Fatalf("%v: %s", err, out.String())
	}
	urls := regexp.MustCompile(`(~[a-z-]+)\s+udp \S+\s+metrics (http://\S+/metrics)`).FindAllStringSubmatch(out.String(), -1)
	if len(urls) != 3 {
		t.Fatalf("want 3 relays with metrics URLs:\n%s", out.String())
	}
	for _, u := range urls {
		code, body := get(t, u[2])
		m := parseMetrics(t, body)
		if code != 200 || m["relay_forward_sends_total"] < 1 || m[`relay_packets_in_total{kind="peek"}`] < 1 {
			t.Errorf("%s: status %d forwards %v", u[1], code, m["relay_forward_sends_total"])
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("demo --keep did not stop")
	}
	if !strings.HasSuffix(out.String(), "Stopped.\n") {
		t.Errorf("output ends %q", out.String()[max(0, len(out.String())-40):])
	}
}

func TestDemoBadFlag(t *testing.T) {
	if code := run([]string{"demo", "--nope"}, nil, io.Discard, io.Discard); code != exitUsage {
		t.Fatalf("exit %d", code)
	}
}
