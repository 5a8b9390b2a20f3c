//go:build linux

package transport

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// requireGRO skips unless c is a Linux socket with UDP_GRO set.
func requireGRO(t testing.TB, c Conn) *batchConn {
	t.Helper()
	bc, ok := c.(*batchConn)
	if !ok || !bc.GRO() {
		t.Skip("UDP_GRO unavailable (Linux < 5.0)")
	}
	return bc
}

// groCmsg returns a control buffer holding one SOL_UDP/UDP_GRO message
// with an int segment size, as udp_cmsg_recv writes it, after an
// unrelated message (so the walk must step over one).
func groCmsg(size int32) []byte {
	b := make([]byte, unix.CmsgSpace(4)+unix.CmsgSpace(4))
	put := func(off int, level, typ int32, v int32) {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&b[off]))
		h.Level, h.Type = level, typ
		h.SetLen(unix.CmsgLen(4))
		binary.NativeEndian.PutUint32(b[off+unix.CmsgLen(0):], uint32(v))
	}
	put(0, unix.SOL_SOCKET, unix.SO_TIMESTAMP, 7)
	put(unix.CmsgSpace(4), unix.SOL_UDP, unix.UDP_GRO, size)
	return b
}

func TestGROSize(t *testing.T) {
	good := groCmsg(1030)
	for _, tc := range []struct {
		name string
		ctrl []byte
		want int
	}{
		{"gro after another", good, 1030},
		{"empty", nil, 0},
		{"header cut", good[:unix.SizeofCmsghdr-1], 0},
		{"second cut", good[:unix.CmsgSpace(4)+unix.CmsgLen(4)-1], 0},
		{"negative size", groCmsg(-5), 0},
		{"other only", good[:unix.CmsgSpace(4)], 0},
	} {
		if got := groSize(tc.ctrl); got != tc.want {
			t.Errorf("%s: groSize = %d, want %d", tc.name, got, tc.want)
		}
	}
	// A length field pointing past the buffer or below the header stops
	// the walk.
	bad := groCmsg(1030)
	(*unix.Cmsghdr)(unsafe.Pointer(&bad[0])).SetLen(1 << 20)
	if got := groSize(bad); got != 0 {
		t.Errorf("overlong first length: %d", got)
	}
	(*unix.Cmsghdr)(unsafe.Pointer(&bad[0])).SetLen(3)
	if got := groSize(bad); got != 0 {
		t.Errorf("short first length: %d", got)
	}
}

// checkSplit checks groSplit's invariants on one call and returns the
// segments it produced.
func checkSplit(t *testing.T, read []byte, size int, bufLens []int) [][]byte {
	t.Helper()
	var segs [][]byte
	off := 0
	for round := 0; ; round++ {
		dst := make([]Message, len(bufLens))
		for i, l := range bufLens {
			dst[i].Buf = make([]byte, l)
		}
		n, next, done := groSplit(dst, read, size, off)
		if n < 0 || n > len(dst) || (len(dst) > 0 && n == 0 && !done) {
			t.Fatalf("round %d: n %d of %d slots, done %v", round, n, len(dst), done)
		}
		for _, m := range dst[:n] {
			if m.N > len(m.Buf) || m.N < 0 {
				t.Fatalf("N %d outside Buf %d", m.N, len(m.Buf))
			}
			segs = append(segs, m.Buf[:m.N])
			if m.Trunc {
				segs[len(segs)-1] = nil // cut: compared by length below
			}
		}
		if done {
			return segs
		}
		if len(dst) == 0 {
			return nil
		}
		if next <= off && !(off == 0 && next == 0 && n > 0) {
			t.Fatalf("no progress: off %d -> %d", off, next)
		}
		off = next
		if round > len(read)+2 {
			t.Fatalf("split did not finish")
		}
	}
}

// TestGROSplit: a coalesced read comes out as its datagrams, whatever the
// number of messages per call; a one-datagram read and an empty one as
// one; a segment longer than the Buf cut and marked.
func TestGROSplit(t *testing.T) {
	read := make([]byte, 5*100+37)
	for i := range read {
		read[i] = byte(i)
	}
	for _, slots := range []int{1, 2, 3, 6, 64} {
		lens := make([]int, slots)
		for i := range lens {
			lens[i] = 200
		}
		segs := checkSplit(t, read, 100, lens)
		if len(segs) != 6 {
			t.Fatalf("%d slots: %d segments, want 6", slots, len(segs))
		}
		if !bytes.Equal(bytes.Join(segs, nil), read) || len(segs[5]) != 37 {
			t.Fatalf("%d slots: segments do not rebuild the read", slots)
		}
	}
	for _, size := range []int{0, len(read), len(read) + 1} {
		if segs := checkSplit(t, read, size, []int{len(read) + 1}); len(segs) != 1 || !bytes.Equal(segs[0], read) {
			t.Fatalf("size %d: %d segments, want the whole read", size, len(segs))
		}
	}
	if segs := checkSplit(t, nil, 0, []int{10, 10}); len(segs) != 1 || len(segs[0]) != 0 {
		t.Fatalf("empty read: %d segments", len(segs))
	}
	dst := []Message{{Buf: make([]byte, 60)}, {Buf: make([]byte, 200)}}
	n, _, _ := groSplit(dst, read, 100, 0)
	if n != 2 || !dst[0].Trunc || dst[0].N != 60 || dst[1].Trunc || dst[1].N != 100 {
		t.Fatalf("cut segment: n %d, %+v %+v", n, dst[0].Trunc, dst[1].Trunc)
	}
}

func FuzzGROSize(f *testing.F) {
	f.Add(groCmsg(1030))
	f.Add([]byte{})
	f.Add(groCmsg(-1)[:20])
	f.Fuzz(func(t *testing.T, ctrl []byte) {
		if n := groSize(ctrl); n < 0 {
			t.Fatalf("groSize = %d", n)
		}
	})
}

func FuzzGROSplit(f *testing.F) {
	f.Add(make([]byte, 300), uint16(100), uint8(2), uint16(150))
	f.Add([]byte{}, uint16(0), uint8(1), uint16(1))
	f.Fuzz(func(t *testing.T, read []byte, size uint16, slots uint8, bufLen uint16) {
		if slots == 0 || slots > 80 {
			return
		}
		lens := make([]int, slots)
		for i := range lens {
			lens[i] = int(bufLen) + i
		}
		segs := checkSplit(t, read, int(size), lens)
		s := int(size)
		if s <= 0 || s >= len(read) {
			s = max(len(read), 1)
		}
		want := max((len(read)+s-1)/s, 1)
		if len(segs) != want {
			t.Fatalf("%d segments, want %d", len(segs), want)
		}
		off := 0
		for i, seg := range segs {
			end := min(off+s, len(read))
			if seg != nil && !bytes.Equal(seg, read[off:end]) {
				t.Fatalf("segment %d differs", i)
			}
			if seg == nil && end-off <= lens[i%len(lens)] && end-off <= int(bufLen) {
				t.Fatalf("segment %d marked cut though it fits", i)
			}
			off = end
		}
	})
}

// TestGROLoopback: a GSO send of a run on loopback reaches a GRO socket as
// coalesced reads (Linux keeps the run whole on lo when the receiver has
// UDP_GRO), which ReadBatch splits back into the datagrams, in order, with
// the sender's address, read through fewer slots than datagrams so that a
// read's remainder carries over to the next call; its twin without GRO
// reads the same datagrams with no coalesced read.
func TestGROLoopback(t *testing.T) {
	for _, noGRO := range []bool{false, true} {
		for _, slots := range []int{DefaultBatchSize, 5} {
			t.Run(fmt.Sprintf("gro=%v/slots=%d", !noGRO, slots), func(t *testing.T) {
				tx := requireGSO(t, listenUDP(t, loopback4, Options{}))
				rxc := listenUDP(t, loopback4, Options{DisableGRO: noGRO})
				rx := rxc.(*batchConn)
				if noGRO && rx.GRO() {
					t.Fatal("GRO() with DisableGRO")
				}
				if !noGRO {
					requireGRO(t, rxc)
				}
				const runs, per, size = 3, 40, 1030
				var out []Message
				var want [][]byte
				for r := range runs {
					for i := range per {
						n := size
						if i == per-1 {
							n = 77 // a short last segment ends the run
						}
						b := sizedPayload(byte(r), i, n)
						want = append(want, b)
						out = append(out, Message{Buf: b, N: n, Addr: rxc.LocalAddr()})
					}
				}
				writeAll(t, tx, out)
				in := newReadMsgs(slots, testDatagramCap)
				var got [][]byte
				for len(got) < len(want) {
					msgs, _ := readSome(t, rxc, in)
					for _, m := range msgs {
						if m.Trunc || m.Addr != tx.LocalAddr() {
							t.Fatalf("datagram %d: trunc %v from %v, want %v", len(got), m.Trunc, m.Addr, tx.LocalAddr())
						}
						got = append(got, append([]byte(nil), m.Buf[:m.N]...))
					}
				}
				for i := range want {
					if !bytes.Equal(got[i], want[i]) {
						t.Fatalf("datagram %d: %d bytes, want %d (order or content differs)", i, len(got[i]), len(want[i]))
					}
				}
				var coalesced uint64
				if rx.groRx != nil {
					coalesced = rx.groRx.coalesced
				}
				if noGRO && coalesced != 0 || !noGRO && coalesced == 0 {
					t.Fatalf("%d coalesced reads with GRO %v", coalesced, !noGRO)
				}
			})
		}
	}
}

// TestGROTruncated: with GRO, a segment longer than the caller's Buf is
// cut and marked, and the next segment still arrives whole.
func TestGROTruncated(t *testing.T) {
	tx := requireGSO(t, listenUDP(t, loopback4, Options{}))
	rxc := listenUDP(t, loopback4, Options{})
	requireGRO(t, rxc)
	out := []Message{
		{Buf: sizedPayload(1, 0, 500), N: 500, Addr: rxc.LocalAddr()},
		{Buf: sizedPayload(1, 1, 500), N: 500, Addr: rxc.LocalAddr()},
		{Buf: sizedPayload(1, 2, 100), N: 100, Addr: rxc.LocalAddr()},
	}
	writeAll(t, tx, out)
	in := []Message{{Buf: make([]byte, 300)}, {Buf: make([]byte, 300)}, {Buf: make([]byte, 300)}}
	var got []Message
	for len(got) < 3 {
		msgs, _ := readSome(t, rxc, in[len(got):])
		got = append(got, msgs...)
	}
	if !got[0].Trunc || got[0].N != 300 || !got[1].Trunc || got[2].Trunc || got[2].N != 100 ||
		!bytes.Equal(got[2].Buf[:100], out[2].Buf) {
		t.Fatalf("trunc %v %v %v, N %d %d %d", got[0].Trunc, got[1].Trunc, got[2].Trunc, got[0].N, got[1].N, got[2].N)
	}
}

// readSome makes one ReadBatch into in (bounded by testReadTimeout) and
// returns the messages filled.
func readSome(t *testing.T, c Conn, in []Message) ([]Message, int) {
	t.Helper()
	timer := time.AfterFunc(testReadTimeout, func() { c.Close() })
	defer timer.Stop()
	n, err := c.ReadBatch(in)
	if err != nil {
		t.Fatalf("ReadBatch: %v", err)
	}
	return in[:n], n
}

// TestGROReadAllocs: steady-state GRO reads, coalesced and split, allocate
// nothing.
func TestGROReadAllocs(t *testing.T) {
	tx := requireGSO(t, listenUDP(t, loopback4, Options{}))
	rxc := listenUDP(t, loopback4, Options{})
	requireGRO(t, rxc)
	dst := rxc.LocalAddr()
	out := make([]Message, 32)
	for i := range out {
		b := sizedPayload(2, i, 600)
		out[i] = Message{Buf: b, N: len(b), Addr: dst}
	}
	in := newReadMsgs(8, testDatagramCap)
	allocs := testing.AllocsPerRun(20, func() {
		writeAll(t, tx, out)
		for got := 0; got < len(out); {
			n, err := rxc.ReadBatch(in)
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per 32-datagram GRO read", allocs)
	}
}
