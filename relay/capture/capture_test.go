package capture

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

var (
	relayLane = netip.MustParseAddrPort("10.0.0.1:13337")
	peerLane  = netip.MustParseAddrPort("192.0.2.7:40000")
	peer6Lane = netip.MustParseAddrPort("[2001:db8::7]:40001")
)

func testRecords() []Record {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)
	big := bytes.Repeat([]byte{0xab}, 60000)
	return []Record{
		{Time: t0, Src: peerLane, Dst: relayLane, Payload: []byte("hello")},
		{Time: t0.Add(time.Millisecond), Src: relayLane, Dst: peerLane, Payload: []byte{}},
		{Time: t0.Add(2 * time.Millisecond), Src: peer6Lane, Dst: relayLane, Payload: []byte("over v6")},
		{Time: t0.Add(3 * time.Millisecond), Src: relayLane, Dst: peer6Lane, Payload: []byte{1, 2, 3}},
		{Time: t0.Add(4 * time.Millisecond), Src: peerLane, Dst: relayLane, Payload: big},
	}
}

func encodeAll(t testing.TB, recs []Record) []byte {
	t.Helper()
	var buf bytes.Buffer
	e, err := NewEncoder(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := e.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func readAll(t testing.TB, r *Reader) []Record {
	t.Helper()
	var out []Record
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
}

func sameRecord(a, b Record) bool {
	return a.Time.Equal(b.Time) && a.Src == b.Src && a.Dst == b.Dst && bytes.Equal(a.Payload, b.Payload)
}

func TestEncodeReadRoundTrip(t *testing.T) {
	want := testRecords()
	file := encodeAll(t, want)
	if got := binary.LittleEndian.Uint32(file[20:24]); got != uint32(layers.LinkTypeRaw) {
		t.Fatalf("link type %d, want LINKTYPE_RAW", got)
	}
	r, err := NewReader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, r)
	if len(got) != len(want) {
		t.Fatalf("read %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if !sameRecord(got[i], want[i]) {
			t.Errorf("record %d: got %v %v→%v %d B, want %v %v→%v %d B", i,
				got[i].Time, got[i].Src, got[i].Dst, len(got[i].Payload),
				want[i].Time, want[i].Src, want[i].Dst, len(want[i].Payload))
		}
	}
}

// TestHeadersMatchGopacket checks the synthesized headers byte for byte
// against gopacket's serializer (with checksums), so Wireshark and tshark
// see what any capture library would have written.
func TestHeadersMatchGopacket(t *testing.T) {
	for _, tc := range []struct {
		name     string
		src, dst netip.AddrPort
	}{
		{"v4", peerLane, relayLane},
		{"v6", peer6Lane, netip.MustParseAddrPort("[2001:db8::1]:13337")},
		{"mixed", peer6Lane, relayLane},
	} {
		t.Run(tc.name, func(t *testing.T) {
			payload := []byte("a datagram of odd length")
			got := appendPacket(nil, tc.src, tc.dst, payload)
			udp := &layers.UDP{SrcPort: layers.UDPPort(tc.src.Port()), DstPort: layers.UDPPort(tc.dst.Port())}
			var ip gopacket.SerializableLayer
			v6 := !tc.src.Addr().Is4() || !tc.dst.Addr().Is4()
			if v6 {
				s, d := tc.src.Addr().As16(), tc.dst.Addr().As16()
				l := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolUDP, HopLimit: ipTTL, SrcIP: net.IP(s[:]), DstIP: net.IP(d[:])}
				_ = udp.SetNetworkLayerForChecksum(l)
				ip = l
			} else {
				s, d := tc.src.Addr().As4(), tc.dst.Addr().As4()
				l := &layers.IPv4{Version: 4, IHL: 5, Flags: layers.IPv4DontFragment, TTL: ipTTL, Protocol: layers.IPProtocolUDP, SrcIP: net.IP(s[:]), DstIP: net.IP(d[:])}
				_ = udp.SetNetworkLayerForChecksum(l)
				ip = l
			}
			buf := gopacket.NewSerializeBuffer()
			opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
			if err := gopacket.SerializeLayers(buf, opts, ip, udp, gopacket.Payload(payload)); err != nil {
				t.Fatal(err)
			}
			want := buf.Bytes()
			if !v6 {
				// We leave the IPv4 UDP checksum at 0 ("none").
				want = append([]byte(nil), want...)
				want[IPv4HeaderLen+6], want[IPv4HeaderLen+7] = 0, 0
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("headers differ:\n got %x\nwant %x", got, want)
			}
			p := gopacket.NewPacket(got, layers.LinkTypeRaw, gopacket.Default)
			if u, ok := p.Layer(layers.LayerTypeUDP).(*layers.UDP); !ok {
				t.Fatal("gopacket finds no UDP layer")
			} else if v6 {
				_ = u.SetNetworkLayerForChecksum(p.NetworkLayer())
				if err, res := u.VerifyChecksum(); err != nil || !res.Valid {
					t.Fatalf("UDP checksum: %v %+v", err, res)
				}
			}
		})
	}
}

func TestReaderFormats(t *testing.T) {
	want := testRecords()[:4]
	t.Run("gzip", func(t *testing.T) {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		zw.Write(encodeAll(t, want))
		zw.Close()
		r, err := NewReader(&z)
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, r); len(got) != len(want) || !sameRecord(got[2], want[2]) {
			t.Fatalf("gzip: read %d records", len(got))
		}
	})
	t.Run("pcapng-ethernet", func(t *testing.T) {
		// tcpdump on an interface: pcapng, Ethernet framing, plus a
		// non-UDP record that must be skipped.
		var f bytes.Buffer
		w, err := pcapgo.NewNgWriter(&f, layers.LinkTypeEthernet)
		if err != nil {
			t.Fatal(err)
		}
		eth := func(typ layers.EthernetType, pkt []byte) []byte {
			h := make([]byte, 14, 14+len(pkt))
			binary.BigEndian.PutUint16(h[12:14], uint16(typ))
			return append(h, pkt...)
		}
		for _, r := range want {
			pkt := appendPacket(nil, r.Src, r.Dst, r.Payload)
			typ := layers.EthernetTypeIPv4
			if pkt[0]>>4 == 6 {
				typ = layers.EthernetTypeIPv6
			}
			data := eth(typ, pkt)
			if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: r.Time, Length: len(data), CaptureLength: len(data)}, data); err != nil {
				t.Fatal(err)
			}
		}
		arp := eth(layers.EthernetTypeARP, make([]byte, 28))
		w.WritePacket(gopacket.CaptureInfo{Timestamp: want[0].Time, Length: len(arp), CaptureLength: len(arp)}, arp)
		w.Flush()
		r, err := NewReader(&f)
		if err != nil {
			t.Fatal(err)
		}
		got := readAll(t, r)
		if len(got) != len(want) || r.Skipped() != 1 {
			t.Fatalf("read %d records, skipped %d", len(got), r.Skipped())
		}
		for i := range want {
			if !sameRecord(got[i], want[i]) {
				t.Errorf("record %d differs", i)
			}
		}
	})
	t.Run("cut-short", func(t *testing.T) {
		file := encodeAll(t, want)
		r, err := NewReader(bytes.NewReader(file[:len(file)-2]))
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, r); len(got) != len(want)-1 {
			t.Fatalf("read %d records of a file cut short, want %d", len(got), len(want)-1)
		}
	})
	t.Run("not-pcap", func(t *testing.T) {
		if _, err := NewReader(bytes.NewReader([]byte("hello, world"))); err == nil {
			t.Fatal("read a text file as a capture")
		}
	})
}

func TestWriterRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.pcap")
	w, err := NewRotating(path, DefaultMaxBytes, 2)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	w.Tap(true, relayLane, peerLane, []byte("in"))
	b := []byte("out")
	w.Tap(false, relayLane, peer6Lane, b)
	b[0] = 'X' // Tap must have copied it
	after := time.Now()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w.Tap(true, relayLane, peerLane, []byte("late"))
	st := w.Stats()
	if st.Records != 2 || st.Dropped != 1 || st.Bytes != uint64(fileSize(t, path)) {
		t.Fatalf("stats %+v, file %d B", st, fileSize(t, path))
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := readAll(t, r)
	want := []Record{
		{Src: peerLane, Dst: relayLane, Payload: []byte("in")},
		{Src: relayLane, Dst: peer6Lane, Payload: []byte("out")},
	}
	if len(got) != len(want) {
		t.Fatalf("read %d records", len(got))
	}
	for i := range want {
		want[i].Time = got[i].Time
		if !sameRecord(got[i], want[i]) || got[i].Time.Before(before.Truncate(time.Microsecond)) || got[i].Time.After(after) {
			t.Errorf("record %d: %+v, want %+v (taken between %v and %v)", i, got[i], want[i], before, after)
		}
	}
	if w.Close() != nil {
		t.Fatal("second Close failed")
	}
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// seqPayload is a datagram carrying a writer index and a sequence number.
func seqPayload(buf []byte, writer, seq uint32, size int) []byte {
	buf = buf[:size]
	binary.LittleEndian.PutUint32(buf[0:4], writer)
	binary.LittleEndian.PutUint32(buf[4:8], seq)
	return buf
}

func TestWriterRotationBounds(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cap.pcap")
	const maxBytes, maxFiles, n = MinMaxBytes, 3, 3000
	w, err := NewRotating(path, maxBytes, maxFiles)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1024)
	for i := range uint32(n) {
		w.Tap(i%2 == 0, relayLane, peerLane, seqPayload(buf, 0, i, 1000))
		if i%100 == 99 {
			// Let the disk goroutine catch up, so that the test
			// checks rotation rather than drops.
			w.flushNow()
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	if st.Records != n || st.Dropped != 0 || st.Rotations == 0 {
		t.Fatalf("stats %+v: want %d records, none dropped, with rotations", st, n)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) > maxFiles {
		t.Fatalf("%d files, want at most %d", len(entries), maxFiles)
	}
	var total int64
	var seqs []uint32
	for i := maxFiles - 1; i >= 0; i-- {
		name := path
		if i > 0 {
			name = fmt.Sprintf("%s.%d", path, i)
		}
		size := fileSize(t, name)
		if size > maxBytes {
			t.Errorf("%s is %d B, over %d", name, size, maxBytes)
		}
		total += size
		r, err := Open(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range readAll(t, r) {
			seqs = append(seqs, binary.LittleEndian.Uint32(rec.Payload[4:8]))
		}
		r.Close()
	}
	if total > maxBytes*maxFiles {
		t.Fatalf("capture holds %d B, over %d", total, maxBytes*maxFiles)
	}
	// The files hold the newest records, oldest file first, in order.
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("record %d has seq %d after %d", i, seqs[i], seqs[i-1])
		}
	}
	if len(seqs) == 0 || (st.Dropped == 0 && seqs[len(seqs)-1] != n-1) {
		t.Fatalf("last record %v, want seq %d", seqs[len(seqs)-1:], n-1)
	}
}

func TestWriterKeepsPreviousCapture(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cap.pcap")
	for run := range 3 {
		w, err := NewRotating(path, MinMaxBytes, 2)
		if err != nil {
			t.Fatal(err)
		}
		w.Tap(true, relayLane, peerLane, []byte{byte(run)})
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Runs 1 and 2 are kept; run 0 was the oldest of three.
	for name, want := range map[string]byte{path: 2, path + ".1": 1} {
		r, err := Open(name)
		if err != nil {
			t.Fatal(err)
		}
		got := readAll(t, r)
		r.Close()
		if len(got) != 1 || got[0].Payload[0] != want {
			t.Fatalf("%s holds %v, want run %d", name, got, want)
		}
	}
	if _, err := os.Stat(path + ".2"); err == nil {
		t.Fatal("a third file exists with maxFiles 2")
	}
}

// TestWriterFileMode: every capture file, the current and the rotated, and
// an empty file left at the path before, is readable by its owner only.
func TestWriterFileMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cap.pcap")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := NewRotating(path, MinMaxBytes, 3)
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 60000)
	for range 6 { // past MinMaxBytes: at least one rotation
		w.Tap(true, relayLane, peerLane, big)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Stats().Rotations == 0 {
		t.Fatal("no rotation")
	}
	for _, name := range []string{path, path + ".1"} {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm != FileMode {
			t.Errorf("%s has mode %v, want %v", name, perm, os.FileMode(FileMode))
		}
	}
}

func TestWriterConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cap.pcap")
	w, err := NewRotating(path, DefaultMaxBytes, 1)
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 2000
	var wg sync.WaitGroup
	for g := range uint32(writers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 200)
			for i := range uint32(each) {
				w.Tap(true, relayLane, peerLane, seqPayload(buf, g, i, 100+int(i%100)))
			}
		}()
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	if st.Records+st.Dropped != writers*each {
		t.Fatalf("stats %+v, want %d records+dropped", st, writers*each)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	recs := readAll(t, r)
	if uint64(len(recs)) != st.Records {
		t.Fatalf("file has %d records, stats say %d", len(recs), st.Records)
	}
	last := map[uint32]int64{}
	for _, rec := range recs {
		g, i := binary.LittleEndian.Uint32(rec.Payload[0:4]), binary.LittleEndian.Uint32(rec.Payload[4:8])
		if prev, ok := last[g]; ok && int64(i) <= prev {
			t.Fatalf("writer %d: seq %d after %d", g, i, prev)
		}
		if len(rec.Payload) != 100+int(i%100) {
			t.Fatalf("writer %d seq %d: %d bytes", g, i, len(rec.Payload))
		}
		last[g] = int64(i)
	}
}

func TestTapAllocs(t *testing.T) {
	w, err := NewRotating(filepath.Join(t.TempDir(), "cap.pcap"), DefaultMaxBytes, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	b := make([]byte, 1024)
	if n := testing.AllocsPerRun(2000, func() { w.Tap(true, relayLane, peer6Lane, b) }); n != 0 {
		t.Fatalf("Tap allocates %.1f times per call", n)
	}
}

func TestNewRotatingRejects(t *testing.T) {
	dir := t.TempDir()
	if _, err := NewRotating(filepath.Join(dir, "a"), MinMaxBytes-1, 1); err == nil {
		t.Error("accepted a max size below MinMaxBytes")
	}
	if _, err := NewRotating(filepath.Join(dir, "b"), MinMaxBytes, 0); err == nil {
		t.Error("accepted zero files")
	}
	if _, err := NewRotating(filepath.Join(dir, "missing", "c"), MinMaxBytes, 1); err == nil {
		t.Error("opened a file in a missing directory")
	}
}

func TestEncodeRejectsInvalidLane(t *testing.T) {
	e, _ := NewEncoder(io.Discard)
	if err := e.Encode(Record{Src: relayLane}); !errors.Is(err, ErrInvalidLane) {
		t.Fatalf("got %v", err)
	}
}

// vectorPayloads returns datagrams from the reference vectors, for seeds.
func vectorPayloads(t testing.TB, n int) [][]byte {
	t.Helper()
	f, err := os.Open("../../testdata/mesa/mesa-vectors.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() && len(out) < n {
		var v struct{ Hex string }
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		b, err := hex.DecodeString(v.Hex)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func FuzzDecodeUDP(f *testing.F) {
	for i, p := range vectorPayloads(f, 16) {
		src, dst := peerLane, relayLane
		if i%2 == 1 {
			src = peer6Lane
		}
		pkt := appendPacket(nil, src, dst, p)
		f.Add(pkt)
		f.Add(pkt[:len(pkt)/2])
	}
	f.Add([]byte{0x45})
	f.Fuzz(func(t *testing.T, data []byte) {
		src, dst, payload, ok := decodeUDP(layers.LinkTypeRaw, data)
		if !ok {
			return
		}
		if !src.IsValid() || !dst.IsValid() || len(payload) > len(data) {
			t.Fatalf("decoded %v→%v with %d of %d bytes", src, dst, len(payload), len(data))
		}
		// What decodes re-encodes to the same lanes and payload.
		again := appendPacket(nil, src, dst, payload)
		s2, d2, p2, ok := decodeUDP(layers.LinkTypeRaw, again)
		if !ok || s2 != src || d2 != dst || !bytes.Equal(p2, payload) {
			t.Fatalf("re-encoded packet decodes as %v→%v %x", s2, d2, p2)
		}
	})
}

func BenchmarkTap(b *testing.B) {
	w, err := NewRotating(filepath.Join(b.TempDir(), "cap.pcap"), DefaultMaxBytes, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	p := make([]byte, 1024)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		w.Tap(true, relayLane, peerLane, p)
	}
	b.StopTimer()
	st := w.Stats()
	b.ReportMetric(float64(st.Dropped)/float64(b.N), "dropped/op")
}

func BenchmarkReadRecord(b *testing.B) {
	recs := testRecords()[:4]
	file := encodeAll(b, recs)
	b.ReportAllocs()
	for b.Loop() {
		r, _ := NewReader(bytes.NewReader(file))
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
}

// BenchmarkEncode measures formatting one 1 KiB datagram as a record (the
// work Tap does under its lock when a chunk has room).
func BenchmarkEncode(b *testing.B) {
	e, err := NewEncoder(io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	r := Record{Time: time.Now(), Src: peerLane, Dst: relayLane, Payload: make([]byte, 1024)}
	b.SetBytes(int64(len(r.Payload)))
	b.ReportAllocs()
	for b.Loop() {
		if err := e.Encode(r); err != nil {
			b.Fatal(err)
		}
	}
}
