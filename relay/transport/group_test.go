package transport

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// groupAddrs builds messages to the addresses named by pattern (one
// letter per message, 'a' = port 1, ...), with N = original index.
func groupAddrs(pattern string) []Message {
	msgs := make([]Message, len(pattern))
	for i, ch := range pattern {
		msgs[i] = Message{N: i, Addr: netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), uint16(ch-'a'+1))}
	}
	return msgs
}

// groupRef is the specification of GroupByAddr: a stable sort by the
// index of each address's first appearance.
func groupRef(msgs []Message) []Message {
	rank := make(map[netip.AddrPort]int)
	for _, m := range msgs {
		if _, ok := rank[m.Addr]; !ok {
			rank[m.Addr] = len(rank)
		}
	}
	out := slices.Clone(msgs)
	slices.SortStableFunc(out, func(a, b Message) int { return rank[a.Addr] - rank[b.Addr] })
	return out
}

// sameMsg reports whether a and b are the same message (N is the
// original index in these tests).
func sameMsg(a, b Message) bool { return a.N == b.N && a.Addr == b.Addr && len(a.Buf) == len(b.Buf) }

func patternOf(msgs []Message) string {
	b := make([]byte, len(msgs))
	for i, m := range msgs {
		b[i] = byte('a' + m.Addr.Port() - 1)
	}
	return string(b)
}

func TestGroupByAddr(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"a", "a"},
		{"aaaa", "aaaa"},
		{"aabbcc", "aabbcc"},
		{"abab", "aabb"},
		{"baba", "bbaa"},
		{"abcabcabc", "aaabbbccc"},
		{"abbbbba", "aabbbbb"},
		{"cabbac", "ccaabb"},
		{"abcdefgha", "aabcdefgh"},
	} {
		msgs := groupAddrs(tc.in)
		GroupByAddr(msgs)
		if got := patternOf(msgs); got != tc.want {
			t.Errorf("GroupByAddr(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if want := groupRef(groupAddrs(tc.in)); !slices.EqualFunc(msgs, want, sameMsg) {
			t.Errorf("GroupByAddr(%q) not stable: order %v", tc.in, msgs)
		}
	}
}

// TestGroupByAddrRandom compares GroupByAddr with groupRef on random
// batches, on both sides of the index-table limit, with few and many
// destinations.
func TestGroupByAddrRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{2, 7, 64, 255, groupStackMax, groupStackMax + 1, 300} {
		for _, d := range []int{1, 2, 3, 17, n} {
			for range 20 {
				msgs := make([]Message, n)
				for i := range msgs {
					port := uint16(1 + rng.IntN(d))
					msgs[i] = Message{N: i, Buf: make([]byte, 1), Addr: netip.AddrPortFrom(netip.MustParseAddr("::1"), port)}
				}
				want := groupRef(msgs)
				GroupByAddr(msgs)
				if !slices.EqualFunc(msgs, want, sameMsg) || &msgs[0].Buf[0] != &want[0].Buf[0] {
					t.Fatalf("n=%d d=%d: GroupByAddr differs from a stable grouping", n, d)
				}
			}
		}
	}
}

func TestGroupByAddrAllocs(t *testing.T) {
	for _, n := range []int{64, groupStackMax, 400} {
		orig := make([]Message, n)
		for i := range orig {
			orig[i] = Message{N: i, Addr: netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), uint16(1+i%5))}
		}
		msgs := make([]Message, n)
		if allocs := testing.AllocsPerRun(100, func() {
			copy(msgs, orig)
			GroupByAddr(msgs)
		}); allocs != 0 {
			t.Errorf("n=%d: %v allocations per GroupByAddr, want 0", n, allocs)
		}
	}
}

// BenchmarkGroupByAddr measures grouping a batch of 64 that interleaves
// d destinations round-robin (the worst order for grouping).
func BenchmarkGroupByAddr(b *testing.B) {
	for _, d := range []int{1, 2, 8, 64} {
		b.Run(fmt.Sprintf("dests=%d", d), func(b *testing.B) {
			orig := make([]Message, DefaultBatchSize)
			for i := range orig {
				orig[i] = Message{N: i, Addr: netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), uint16(1+i%d))}
			}
			msgs := make([]Message, len(orig))
			b.ReportAllocs()
			for b.Loop() {
				copy(msgs, orig)
				GroupByAddr(msgs)
			}
		})
	}
}
