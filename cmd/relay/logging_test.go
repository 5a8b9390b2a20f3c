package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/transport"
)

// peekHex is a mesa peek for /c/x/4/hello on ~sampel-palnet (the README's
// decode example).
const peekHex = "10714d110002e067013ff1da60000d000b00632f782f342f68656c6c6f"

func TestPacketLoggerRateLimited(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	level := zap.NewAtomicLevelAt(zapcore.InfoLevel)
	tap := packetLogger(zap.New(core), level)
	b, err := hex.DecodeString(peekHex)
	if err != nil {
		t.Fatal(err)
	}
	local, remote := netip.MustParseAddrPort("127.0.0.1:13337"), netip.MustParseAddrPort("192.0.2.1:4000")
	for i := 0; i < 1000; i++ {
		tap(true, local, remote, b)
	}
	if n := logs.Len(); n != 0 {
		t.Fatalf("%d per-datagram lines at info level", n)
	}
	level.SetLevel(zapcore.DebugLevel)
	start := time.Now()
	for i := 0; i < 1000; i++ {
		tap(true, local, remote, b)
		tap(false, local, remote, b)
	}
	// Within one tick exactly packetLogBurst lines per direction; a
	// machine slow enough to cross into more ticks gets a burst per tick.
	ticks := 1 + int(time.Since(start)/packetLogTick)
	read := logs.FilterMessage("datagram read").Len()
	sent := logs.FilterMessage("datagram sent").Len()
	if read < packetLogBurst || read > ticks*packetLogBurst || sent < packetLogBurst || sent > ticks*packetLogBurst {
		t.Fatalf("logged %d read and %d sent of 1000 each over %d ticks; want %d each per tick", read, sent, ticks, packetLogBurst)
	}
	e := logs.All()[0].ContextMap()
	if e["packet"] != "mesa peek hops 0 ~sampel-palnet /c/x/4/hello" || e["hex"] != peekHex || e["remote"] != "192.0.2.1:4000" {
		t.Errorf("fields %v", e)
	}
}

func TestDescribePacket(t *testing.T) {
	b, _ := hex.DecodeString(peekHex)
	tests := []struct {
		b    []byte
		want string
	}{
		{b, "mesa peek hops 0 ~sampel-palnet /c/x/4/hello"},
		{b[:12], "mesa (malformed)"},
		{[]byte("hello"), "ames (malformed)"},
		{nil, "ames (malformed)"},
	}
	for _, tt := range tests {
		if got := describePacket(tt.b); got != tt.want {
			t.Errorf("describePacket(%x) = %q, want %q", tt.b, got, tt.want)
		}
	}
}

func TestLoggerFormat(t *testing.T) {
	for _, format := range []string{"auto", "json", "console"} {
		var buf bytes.Buffer
		log := newLogger(&buf, format, zap.NewAtomicLevelAt(zapcore.InfoLevel))
		log.Debug("hidden")
		log.Info("relay started", zap.String("ship", "~zod"))
		line := strings.TrimSpace(buf.String())
		if strings.Contains(line, "\n") {
			t.Errorf("%s: %d lines, want 1 (debug hidden)", format, strings.Count(line, "\n")+1)
		}
		var m map[string]any
		isJSON := json.Unmarshal([]byte(line), &m) == nil
		if wantJSON := format != "console"; isJSON != wantJSON {
			t.Errorf("%s: JSON %v, want %v: %s", format, isJSON, wantJSON, line)
		}
		if isJSON && (m["msg"] != "relay started" || m["ship"] != "~zod" || m["level"] != "info") {
			t.Errorf("%s: %v", format, m)
		}
	}
}

// TestDecisionLogger: at info level nothing is wanted; at debug, decisions
// are wanted at most packetLogBurst per tick, and a line says what the
// relay did: action, kind, reason, targets, and the lane it came from.
func TestDecisionLogger(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	level := zap.NewAtomicLevelAt(zapcore.InfoLevel)
	dl := newDecisionLogger(zap.New(core), level)
	for i := 0; i < 1000; i++ {
		if dl.Want() {
			t.Fatal("wanted a decision at info level")
		}
	}
	level.SetLevel(zapcore.DebugLevel)
	start := time.Now()
	wanted := 0
	for i := 0; i < 1000; i++ {
		if dl.Want() {
			wanted++
		}
	}
	ticks := 1 + int(time.Since(start)/packetLogTick)
	if wanted < packetLogBurst || wanted > ticks*packetLogBurst {
		t.Fatalf("wanted %d of 1000 over %d ticks; want %d per tick", wanted, ticks, packetLogBurst)
	}
	from, zod := netip.MustParseAddrPort("192.0.2.1:4000"), netip.MustParseAddrPort("198.51.100.2:13337")
	dl.Log(&relay.Decision{From: from, Len: 29, Kind: relay.KindPeek, Action: relay.ActionForwarded,
		Sends: []transport.Message{{Addr: zod}, {Addr: from}}, Ports: []relay.Port{relay.PortPublic, relay.PortShip}, ToShip: 1})
	dl.Log(&relay.Decision{From: from, Len: 5, Kind: relay.KindOther, Action: relay.ActionDropped, Reason: "malformed_ames"})
	dl.Log(&relay.Decision{FromShip: true, To: zod, Len: 40, Action: relay.ActionDropped, Reason: "bad_target"})
	lines := logs.FilterMessage("decision").All()
	if len(lines) != 3 {
		t.Fatalf("%d decision lines, want 3", len(lines))
	}
	fwd, drop, ship := lines[0].ContextMap(), lines[1].ContextMap(), lines[2].ContextMap()
	if fwd["action"] != "forwarded" || fwd["kind"] != "peek" || fwd["from"] != from.String() || fwd["len"] != int64(29) ||
		fmt.Sprint(fwd["targets"]) != "["+zod.String()+"]" || fwd["reason"] != nil {
		t.Errorf("forwarded: %v", fwd)
	}
	if drop["action"] != "dropped" || drop["reason"] != "malformed_ames" || drop["kind"] != "other" || fmt.Sprint(drop["targets"]) != "[]" {
		t.Errorf("dropped: %v", drop)
	}
	if ship["from_ship"] != true || ship["to"] != zod.String() || ship["reason"] != "bad_target" || ship["from"] != nil {
		t.Errorf("from the ship: %v", ship)
	}
}
