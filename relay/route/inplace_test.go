package route

import (
	"testing"

	"github.com/urbit-relay/relay/lane"
)

// The hot paths read lanes in place (by pointer) where lane.Key's methods
// take them by value; these pin that the in-place forms are the same.

// TestKeyHashIsHash: the lane clock's in-place hash is lane.Key.Hash, so
// that reading lanes in place changed no slot.
func TestKeyHashIsHash(t *testing.T) {
	keys := []lane.Key{{}, key("203.0.113.10:5000"), key("[2001:db8::1]:13337"), {Port: 1}}
	var k lane.Key
	for i := range 1000 {
		for j := range k.IP {
			k.IP[j] = byte(lane.Mix64(uint64(i*len(k.IP)+j) + 1))
		}
		k.Port = uint16(lane.Mix64(uint64(i)))
		keys = append(keys, k)
	}
	for _, k := range keys {
		if got, want := keyHash(&k), k.Hash(); got != want {
			t.Fatalf("keyHash(%v) = %#x, Hash %#x", k, got, want)
		}
	}
}
