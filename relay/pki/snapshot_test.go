package pki

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urbit-relay/relay/lane"
)

func TestParseSnapshot(t *testing.T) {
	alice := newTestShip(t, palnet, 1)
	alice.entry.Life, alice.entry.Rift = 7, 2
	bob := newTestShip(t, marzod, 50)
	var comet testShip
	for seed := byte(1); ; seed++ {
		comet = newTestShip(t, lane.Ship{}, seed)
		comet.entry.Ship = CometShip(&comet.entry.Pass)
		if comet.entry.Ship.Class() == lane.Comet {
			break
		}
	}
	line := func(s testShip) string { return string(s.entry.AppendLine(nil)) }
	text := "# azimuth snapshot\n\n" + line(alice) + "  \t" + strings.TrimSuffix(line(bob), "\n") + "\t\n" + line(comet)
	snap, err := ParseSnapshot([]byte(text), 0)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Len() != 3 {
		t.Fatalf("%d ships, want 3", snap.Len())
	}
	k, ok := snap.lookup(palnet)
	if !ok || k.life != 7 || k.rift != 2 || string(k.sign[:]) != string(alice.entry.Pass.SignKey()) {
		t.Fatalf("alice: %+v %v", k, ok)
	}
	// A decimal ship is the same ship.
	dec := fmt.Sprintf("%d 1 0 %x\n", palnet.Lo, alice.entry.Pass[:])
	if s, err := ParseSnapshot([]byte(dec), 0); err != nil || s.Len() != 1 {
		t.Fatalf("decimal ship: %v", err)
	}
}

func TestParseSnapshotErrors(t *testing.T) {
	alice := newTestShip(t, palnet, 1)
	good := strings.TrimSuffix(string(alice.entry.AppendLine(nil)), "\n")
	pass := fmt.Sprintf("%x", alice.entry.Pass[:])
	f := strings.Fields(good)
	otherComet := "~dozryt--wolmep-racmyl-padpeg-mocryp" // not this pass's comet
	cases := []struct {
		text, want string
	}{
		{"~zod 1 0\n", "line 1: want 4 fields"},
		{"# c\n" + good + " extra\n", "line 2: want 4 fields"},
		{"~notaship 1 0 " + pass, "line 1: lane: invalid ship"},
		{f[0] + " 0 0 " + pass, "line 1: life \"0\""},
		{f[0] + " x 0 " + pass, "line 1: life \"x\""},
		{f[0] + " 1 -1 " + pass, "line 1: rift \"-1\""},
		{f[0] + " 1 4294967296 " + pass, "line 1: rift"},
		{f[0] + " 1 0 " + pass[:128], "line 1: pass: want 130 hex digits, got 128"},
		{f[0] + " 1 0 " + pass[:128] + "zz", "line 1: pass: encoding/hex"},
		{f[0] + " 1 0 42" + pass[2:], "line 1: pass: starts 42"},
		{good + "\n" + good, "line 2: " + f[0] + " listed twice"},
		{otherComet + " 1 0 " + pass, "line 1: comet " + otherComet + ": its pass is the key of"},
		{strings.Repeat(" ", MaxLineLen+1), "line 1: longer than 512 bytes"},
	}
	for _, c := range cases {
		_, err := ParseSnapshot([]byte(c.text), 0)
		if err == nil || !errors.Is(err, ErrSnapshot) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.text, err, c.want)
		}
	}
	two := good + "\n" + strings.Replace(good, f[0], "~marzod", 1) + "\n"
	if _, err := ParseSnapshot([]byte(two), 1); err == nil || !strings.Contains(err.Error(), "line 2: more than 1 ships") {
		t.Errorf("cap of 1: %v", err)
	}
	if s, err := ParseSnapshot([]byte(two), 2); err != nil || s.Len() != 2 {
		t.Errorf("cap of 2: %v", err)
	}
}

// TestCometSelfCertifies: a comet line must carry the comet's own key and
// life 1.
func TestCometSelfCertifies(t *testing.T) {
	c := newTestShip(t, lane.Ship{}, 3)
	c.entry.Ship = CometShip(&c.entry.Pass)
	if c.entry.Ship.Class() != lane.Comet {
		t.Skip("seed 3's pass hashes below 2^64") // odds 2^-64
	}
	if _, err := ParseSnapshot(c.entry.AppendLine(nil), 0); err != nil {
		t.Fatal(err)
	}
	c.entry.Life = 2
	if _, err := ParseSnapshot(c.entry.AppendLine(nil), 0); err == nil || !strings.Contains(err.Error(), "comets have life 1") {
		t.Fatalf("life 2 comet: %v", err)
	}
	c.entry.Life = 1
	c.entry.Pass[40] ^= 1
	if _, err := ParseSnapshot(c.entry.AppendLine(nil), 0); err == nil {
		t.Fatal("a comet with another's key parsed")
	}
}

// TestCometShipHashing pins +fig's arithmetic on a pass whose hashes end
// in no zero bytes, computed step by step: shax, mix %bfig, shax, fold.
func TestCometShipHashing(t *testing.T) {
	var p Pass
	p[0] = passTag
	for i := 1; i < PassLen; i++ {
		p[i] = byte(i)
	}
	h := shax(p[:])
	h[0] ^= 'b'
	h[1] ^= 'f'
	h[2] ^= 'i'
	h[3] ^= 'g'
	haz := shax(h[:])
	var want [16]byte
	for i := range want {
		want[i] = haz[i] ^ haz[16+i]
	}
	if got := CometShip(&p); got != lane.ShipFromBytesLE(want[:]) {
		t.Fatalf("CometShip %s, want %s", got, lane.ShipFromBytesLE(want[:]))
	}
	// (met 3) drops a pass's trailing zero bytes before hashing.
	q := p
	q[PassLen-1] = 0
	if CometShip(&q) == CometShip(&p) {
		t.Fatal("the last byte made no difference")
	}
	if a, b := shax(q[:]), shax(q[:PassLen-1]); a != b {
		t.Fatal("shax hashed a trailing zero byte")
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	alice := newTestShip(t, palnet, 1)
	path := filepath.Join(dir, "azimuth.txt")
	if err := os.WriteFile(path, alice.entry.AppendLine([]byte("# one ship\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Load(path, 0)
	if err != nil || s.Len() != 1 {
		t.Fatalf("Load: %v", err)
	}
	if err := os.WriteFile(path, []byte("\n\nbad\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, 0); err == nil || !strings.Contains(err.Error(), path+": pki: bad snapshot: line 3") {
		t.Fatalf("bad file: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing"), 0); err == nil {
		t.Fatal("a missing file loaded")
	}
}
