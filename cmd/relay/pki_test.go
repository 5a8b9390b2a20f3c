package main

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pkiLine is a snapshot line for ship with a key made from seed.
func pkiLine(ship string, seed byte) string {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
	return fmt.Sprintf("%s 1 0 62%x%x\n", ship, priv.Public().(ed25519.PublicKey), make([]byte, 32))
}

// TestCheckPKI: relay check reports the --pki file's ship count, or its
// first bad line as a setting error, from the flag and from the file key.
func TestCheckPKI(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.txt")
	if err := os.WriteFile(keys, []byte("# two ships\n"+pkiLine("~sipsyl", 1)+pkiLine("~ritpub-sipsyl", 2)), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"check", "--ship", "~sipsyl", "--listen", "127.0.0.1:13338", "--pki", keys}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	want := "config ok: ~sipsyl on 127.0.0.1:13338, ship lane none, 0 galaxies, 0 pinned lanes, pki " + keys + ": 2 ships\n"
	if stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout.String(), want)
	}

	bad := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(bad, []byte(pkiLine("~sipsyl", 1)+"~ritpub-sipsyl 1 0 62\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := writeConfig(t, fmt.Sprintf(`{"ship": "~sipsyl", "listen": "127.0.0.1:13338", "pki": %q}`, bad))
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"check", "--config", path}, nil, &stdout, &stderr); code != exitUsage {
		t.Fatalf("bad file: exit %d, stdout %q", code, stdout.String())
	}
	msg := stderr.String()
	for _, w := range []string{`config: "pki": ` + fmt.Sprintf("%q", bad), "pki: bad snapshot: line 2: pass: want 130 hex digits, got 2"} {
		if !strings.Contains(msg, w) {
			t.Errorf("bad file: stderr %q lacks %q", msg, w)
		}
	}
}

// TestReloadPKI: SIGHUP's reload reads the --pki file again, with a config
// file and without one; a bad file keeps the running snapshot.
func TestReloadPKI(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.txt")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(keys, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	one, two := pkiLine("~sipsyl", 1), pkiLine("~sipsyl", 1)+pkiLine("~ritpub-sipsyl", 2)
	config := writeConfig(t, fmt.Sprintf(`{"ship": "~sipsyl", "listen": "127.0.0.1:0", "pki": %q}`, keys))
	for _, args := range [][]string{
		{"--config", config},
		{"--ship", "~sipsyl", "--listen", "127.0.0.1:0", "--pki", keys},
	} {
		write(one)
		cfg, err := loadRunConfig(args)
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		d, err := startDaemon(cfg, args, &stderr)
		if err != nil {
			t.Fatal(err)
		}
		if d.pki.Len() != 1 || cfg.relay.PKI != nil {
			t.Errorf("%v: at start %d ships (want 1); validate set Config.PKI %v", args, d.pki.Len(), cfg.relay.PKI)
		}
		write(two)
		d.reload()
		if d.pki.Len() != 2 {
			t.Errorf("%v: after reload %d ships, want 2", args, d.pki.Len())
		}
		write("~sipsyl 1 0 zz\n")
		d.reload()
		if d.pki.Len() != 2 {
			t.Errorf("%v: a bad file changed the snapshot: %d ships", args, d.pki.Len())
		}
		d.stop()
		if !strings.Contains(stderr.String(), "reload failed") {
			t.Errorf("%v: no failed reload logged:\n%s", args, stderr.String())
		}
	}
}
