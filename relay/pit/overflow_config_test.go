package pit

import (
	"errors"
	"testing"
)

// TestConfigOverflowBound: the overflow pool's chunks per shard must stay
// below MaxEntriesPerShard; the largest MaxOverflowRequesters under the
// bound is taken and the first one at it is refused. It covers the bound
// gremlins found no test reaching (config.go, validate).
func TestConfigOverflowBound(t *testing.T) {
	limit := MaxEntriesPerShard * lanesPerChunk // one shard
	if _, err := New(Config{Shards: 1, MaxEntries: 1, MaxOverflowRequesters: limit - 1}); err != nil {
		t.Errorf("MaxOverflowRequesters %d: %v", limit-1, err)
	}
	if _, err := New(Config{Shards: 1, MaxEntries: 1, MaxOverflowRequesters: limit}); !errors.Is(err, errConfig) {
		t.Errorf("MaxOverflowRequesters %d: %v, want a config error", limit, err)
	}
}
