package relay

import (
	"encoding/hex"
	"testing"
)

// TestShipSafe: the last guard before the ship refuses exactly the shape
// that crashes vere's legacy ames driver (4-9 bytes, relayed bit set:
// ames-malformed.jsonl ids 10, 15, 20) and passes everything else.
func TestShipSafe(t *testing.T) {
	for _, c := range []struct {
		hex  string
		safe bool
	}{
		{"0000000000", false},          // id 10: 5 bytes, bit 31 = 0
		{"0a52992e", false},            // id 15: 4 bytes
		{"068ad120fa9849c205", false},  // id 20: 9 bytes
		{"0420149830feff0100", true},   // 9 bytes, bit 31 = 1: not relayed
		{"000000", true},               // under a header: vere drops it
		{"00000000000000000000", true}, // 10 bytes: the origin fits
	} {
		b, _ := hex.DecodeString(c.hex)
		if got := shipSafe(b); got != c.safe {
			t.Errorf("shipSafe(%s) = %v, want %v", c.hex, got, c.safe)
		}
	}
}
