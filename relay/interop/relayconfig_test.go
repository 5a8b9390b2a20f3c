package interop

import (
	"os"
	"path/filepath"
	"testing"
)

// relayConfig writes text as a relay config file that the unprivileged
// relay (frontRelayUser) can read, and returns the flag naming it: for the
// settings `relay run` holds in its file only (docs/operations.md, "The
// flags"), such as {"routes": {"direct-lane-expiry": "2s"}}. t.TempDir's
// directories are the test user's alone, so the file is in one of its own,
// removed at cleanup.
func relayConfig(t *testing.T, text string) []string {
	t.Helper()
	dir, err := os.MkdirTemp("", "relay-config-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "relay.json")
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"--config", path}
}
