package dissector

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/capture"
	"github.com/urbit-relay/relay/scry"
)

const (
	// galaxyPort is ~zod's port, the first of the range the dissector
	// registers (13337-13592), and the relay's port in the replay fixtures.
	galaxyPort = 13337
	// heurPortA and heurPortB are ports no Wireshark dissector registers,
	// so datagrams between them reach the heuristic.
	heurPortA, heurPortB = 50000, 50001
	// noiseDatagrams is how many random datagrams each run adds.
	noiseDatagrams = 3000
	// maxReported bounds the mismatches a test prints.
	maxReported = 20
)

// datagram is one UDP payload to dissect, with where it came from.
type datagram struct {
	label   string
	src     netip.AddrPort
	dst     netip.AddrPort
	payload []byte
}

// frame is what tshark showed for one record.
type frame struct {
	protocols string              // frame.protocols, e.g. "raw:ip:udp:urbit"
	srcPort   int                 // udp.srcport
	dstPort   int                 // udp.dstport
	fields    map[string][]string // every urbit.* field, values in tree order
}

// env is what every test needs: tshark, the dissector and `relay decode`.
type env struct {
	tshark string
	script string
	relay  string
	root   string
	home   string // an empty HOME and config dir, so no user plugin or preference applies
}

func setup(t *testing.T) *env {
	t.Helper()
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("tshark is not installed; .ci/run installs it (Debian package tshark)")
		}
		t.Skip("tshark is not installed (apt-get install tshark); the Wireshark dissector is not tested")
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	relay, err := buildRelay()
	if err != nil {
		t.Fatal(err)
	}
	return &env{
		tshark: tshark,
		script: filepath.Join(root, "docs", "wireshark", "urbit.lua"),
		relay:  relay,
		root:   root,
		home:   t.TempDir(),
	}
}

// buildRelay builds cmd/relay once for all the tests, into a directory
// TestMain removes.
var buildRelay func() (string, error)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dissector-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buildRelay = sync.OnceValues(func() (string, error) {
		root, err := filepath.Abs(filepath.Join("..", "..", ".."))
		if err != nil {
			return "", err
		}
		bin := filepath.Join(dir, "relay")
		build := exec.Command("go", "build", "-o", bin, "./cmd/relay")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build ./cmd/relay: %v\n%s", err, out)
		}
		return bin, nil
	})
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// vectors returns every datagram of the testdata vectors: each line's
// "hex" in mesa/ and ames/, each request and response in stun/.
func (e *env) vectors(t *testing.T, src, dst netip.AddrPort) []datagram {
	t.Helper()
	var out []datagram
	files, err := filepath.Glob(filepath.Join(e.root, "testdata", "*", "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no vectors: %v", err)
	}
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<22)
		for line := 1; sc.Scan(); line++ {
			var v map[string]any
			if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
				t.Fatalf("%s:%d: %v", path, line, err)
			}
			for _, k := range []string{"hex", "request", "response"} {
				h, ok := v[k].(string)
				if !ok {
					continue
				}
				b, err := hex.DecodeString(h)
				if err != nil {
					t.Fatalf("%s:%d: %s: %v", path, line, k, err)
				}
				label := fmt.Sprintf("%s:%d %s", filepath.Base(path), line, k)
				out = append(out, datagram{label, src, dst, b})
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// fixture returns the records of testdata/replay/<name> as they are.
func (e *env) fixture(t *testing.T, name string) []datagram {
	t.Helper()
	r, err := capture.Open(filepath.Join(e.root, "testdata", "replay", name))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []datagram
	for i := 1; ; i++ {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, datagram{fmt.Sprintf("%s record %d", name, i), rec.Src, rec.Dst, rec.Payload})
	}
	if len(out) == 0 || r.Skipped() != 0 {
		t.Fatalf("%s: %d records, %d not UDP", name, len(out), r.Skipped())
	}
	return out
}

// fixtureNames lists the replay fixtures.
func (e *env) fixtureNames(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(e.root, "testdata", "replay", "*.pcap"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	return names
}

// noise returns random datagrams, a third of them with the mesa cookie and
// version 1, a third with a legacy version-0 header, so that they get past
// the cheap checks and exercise the body parsers and the mug.
func noise(n int, src, dst netip.AddrPort) []datagram {
	rng := rand.New(rand.NewPCG(16, 2026))
	out := make([]datagram, n)
	for i := range out {
		size := rng.IntN(scry.MesaMaxPacket + 16)
		if i%4 == 0 {
			size = rng.IntN(64)
		}
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		switch {
		case i%3 == 0 && size >= scry.MesaHeaderLen:
			b[0] = b[0]&^0x70 | scry.MesaVersion<<4
			copy(b[4:], []byte{0x00, 0x02, 0xe0, 0x67})
		case i%3 == 1 && size >= scry.AmesHeaderLen:
			b[0] &^= 0x70
		}
		out[i] = datagram{fmt.Sprintf("noise %d", i), src, dst, b}
	}
	return out
}

// referenceShips are the @p reference names of urbit-network.md (as in
// lane's tests): the ~fipfes- planets take the Feistel cipher's arvo#1105
// branch, which random ships almost never reach.
var referenceShips = []string{
	"~zod", "~lex", "~marzod", "~fipfes", "~dapnep-ronmyl", "~poldec-tonteg",
	"~nidsut-tomdun", "~morlyd-mogmev", "~fipfes-morlyd", "~dilwes-fadnel",
	"~fipfes-dilwes", "~hossev-roppec", "~fipfes-hossev", "~dostec-risfen",
	"~sampel-palnet", "~dozryt--wolmep-racmyl-padpeg-mocryp",
}

// shipDatagrams returns a peek and a legacy packet for each reference ship
// and for a moon of it, so that each @p is checked against lane's.
func shipDatagrams(t *testing.T, src, dst netip.AddrPort) []datagram {
	t.Helper()
	var out []datagram
	for _, name := range referenceShips {
		ship, err := lane.ParseShip(name)
		if err != nil {
			t.Fatal(err)
		}
		moon := lane.Ship{Lo: 0x1234<<32 | ship.Lo&0xffffffff}
		for _, s := range []lane.Ship{ship, moon} {
			peek := scry.NewPeek(scry.Name{Ship: s, Rift: 1, Bloq: scry.DefaultBloq, Path: []byte("c/x/1")})
			out = append(out, datagram{"peek of " + s.String(), src, dst, peek.Append(nil)})
			ames := scry.NewAmes(s, lane.ShipFromUint64(256), 1, 2, []byte("12345678 message"))
			out = append(out, datagram{"ames from " + s.String(), src, dst, ames.Append(nil)})
		}
	}
	return out
}

// writePcap writes ds to a pcap file in dir, one record each, as `relay
// run --capture` writes them.
func writePcap(t *testing.T, dir string, ds []datagram) string {
	t.Helper()
	path := filepath.Join(dir, "in.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := capture.NewEncoder(f)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, d := range ds {
		rec := capture.Record{Time: t0.Add(time.Duration(i) * time.Millisecond), Src: d.src, Dst: d.dst, Payload: d.payload}
		if err := enc.Encode(rec); err != nil {
			t.Fatalf("%s: %v", d.label, err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// decode runs `relay decode --json` over ds, one stdin line each, and
// returns its report per datagram; nil for empty datagrams, which a line
// cannot carry (nothing dissects them either).
func (e *env) decode(t *testing.T, ds []datagram) []map[string]any {
	t.Helper()
	var in bytes.Buffer
	for _, d := range ds {
		if len(d.payload) > 0 {
			in.WriteString(hex.EncodeToString(d.payload))
			in.WriteByte('\n')
		}
	}
	cmd := exec.Command(e.relay, "decode", "--json")
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("relay decode: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	reports := make([]map[string]any, len(ds))
	next := 0
	for i, d := range ds {
		if len(d.payload) == 0 {
			continue
		}
		if next >= len(lines) {
			t.Fatalf("relay decode: %d lines for more datagrams", len(lines))
		}
		dec := json.NewDecoder(strings.NewReader(lines[next]))
		dec.UseNumber()
		if err := dec.Decode(&reports[i]); err != nil {
			t.Fatalf("relay decode line %d: %v", next+1, err)
		}
		next++
	}
	if next != len(lines) {
		t.Fatalf("relay decode: %d lines for %d datagrams", len(lines), next)
	}
	return reports
}

// tsharkCmd returns tshark with args, with e.home as its home and
// configuration directory.
func (e *env) tsharkCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(e.tshark, args...)
	cmd.Env = append(os.Environ(), "HOME="+e.home, "XDG_CONFIG_HOME="+e.home, "WIRESHARK_CONFIG_DIR="+e.home)
	return cmd
}

// dissect runs tshark with the dissector over pcap and returns one frame
// per record.
func (e *env) dissect(t *testing.T, pcap string, prefs ...string) []frame {
	t.Helper()
	args := []string{"-X", "lua_script:" + e.script, "-r", pcap, "-T", "json", "--no-duplicate-keys", "-J", "frame udp urbit"}
	for _, p := range prefs {
		args = append(args, "-o", p)
	}
	cmd := e.tsharkCmd(args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, stderr.String())
	}
	// Lua errors do not fail tshark: they show in the tree and on stderr.
	if s := stderr.String(); strings.Contains(s, "Lua") || strings.Contains(s, "lua") {
		t.Fatalf("tshark stderr: %s", s)
	}
	var packets []struct {
		Source struct {
			Layers map[string]any `json:"layers"`
		} `json:"_source"`
	}
	if err := json.Unmarshal(out, &packets); err != nil {
		t.Fatalf("tshark -T json: %v", err)
	}
	frames := make([]frame, len(packets))
	for i, p := range packets {
		l := p.Source.Layers
		fr := frame{fields: map[string][]string{}}
		if m, ok := l["frame"].(map[string]any); ok {
			fr.protocols, _ = m["frame.protocols"].(string)
		}
		if m, ok := l["udp"].(map[string]any); ok {
			fr.srcPort = atoi(m["udp.srcport"])
			fr.dstPort = atoi(m["udp.dstport"])
		}
		if m, ok := l["urbit"].(map[string]any); ok {
			flattenTshark(m, fr.fields)
		}
		if strings.Contains(fr.protocols, "_ws.lua") || strings.Contains(fr.protocols, "_ws.malformed:") {
			t.Fatalf("frame %d: %s", i+1, fr.protocols)
		}
		frames[i] = fr
	}
	return frames
}

// afterUDP returns the protocol that took a datagram from UDP: the one after
// "udp" in frame.protocols ("raw:ip:udp:quake3" gives "quake3").
func afterUDP(protocols string) string {
	parts := strings.Split(protocols, ":")
	if i := slices.Index(parts, "udp"); i >= 0 && i+1 < len(parts) {
		return parts[i+1]
	}
	return ""
}

func atoi(v any) int {
	s, _ := v.(string)
	n, _ := strconv.Atoi(s)
	return n
}

// flattenTshark collects the urbit.* leaves of a tshark -T json tree;
// objects are subtrees, arrays repeated fields. Expert items (_ws.*: a
// Lua error, a malformed packet) are collected too, so that they fail the
// comparison.
func flattenTshark(m map[string]any, out map[string][]string) {
	for k, v := range m {
		if strings.HasPrefix(k, "_ws.") {
			out[k] = append(out[k], fmt.Sprint(v))
			continue
		}
		switch v := v.(type) {
		case map[string]any:
			flattenTshark(v, out)
		case string:
			if strings.HasPrefix(k, "urbit.") {
				out[k] = append(out[k], v)
			}
		case []any:
			for _, x := range v {
				if s, ok := x.(string); ok && strings.HasPrefix(k, "urbit.") {
					out[k] = append(out[k], s)
				}
			}
		}
	}
}

// flattenReport maps a `relay decode --json` report to the fields the
// dissector must show: urbit.protocol, and urbit.<protocol>.<key path> for
// every other leaf, one value per array element.
func flattenReport(r map[string]any) map[string][]string {
	out := map[string][]string{}
	proto, _ := r["protocol"].(string)
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				walk(prefix+"."+k, x)
			}
		case []any:
			for _, x := range v {
				walk(prefix, x)
			}
		case bool:
			out[prefix] = append(out[prefix], map[bool]string{false: "0", true: "1"}[v])
		case json.Number:
			out[prefix] = append(out[prefix], v.String())
		case string:
			out[prefix] = append(out[prefix], v)
		}
	}
	for k, v := range r {
		if k == "protocol" {
			walk("urbit.protocol", v)
		} else {
			walk("urbit."+proto+"."+k, v)
		}
	}
	return out
}

// extras returns the fields the dissector adds to the report, from the
// scry and lane codecs: each ship's @p, mesa's reserved header bits and
// printable paths, legacy header bits, ticks and content.
func extras(b []byte, out map[string][]string) {
	add := func(k string, v any) { out[k] = append(out[k], fmt.Sprint(v)) }
	if scry.IsMesa(b) {
		var p scry.Packet
		if p.Parse(b) != nil {
			return
		}
		add("urbit.mesa.head.reserved", p.Header.Reserved)
		names := []*scry.Name{&p.Name}
		keys := []string{"urbit.mesa.name"}
		switch p.Header.Type {
		case scry.TypeReserved:
			names, keys = nil, nil
		case scry.TypePoke:
			names = append(names, &p.PayloadName)
			keys = append(keys, "urbit.mesa.payload_name")
		}
		for i, n := range names {
			add(keys[i]+".ship_patp", n.Ship.String())
			if printable(n.Path) {
				add(keys[i]+".path", string(n.Path))
			}
		}
		return
	}
	var a scry.AmesPacket
	if a.Parse(b) != nil {
		return
	}
	bit := func(yes bool) int { // the wire's loobean: 0 means yes
		if yes {
			return 0
		}
		return 1
	}
	add("urbit.ames.head.reserved", a.Reserved)
	add("urbit.ames.head.req", bit(a.Req))
	add("urbit.ames.head.sam", bit(a.IsAmes))
	add("urbit.ames.head.ver", a.Version)
	add("urbit.ames.head.sac", a.SndrRank)
	add("urbit.ames.head.rac", a.RcvrRank)
	add("urbit.ames.head.mug", a.Mug)
	add("urbit.ames.head.rel", bit(a.Relayed))
	add("urbit.ames.sndr_tick", a.SndrTick)
	add("urbit.ames.rcvr_tick", a.RcvrTick)
	add("urbit.ames.sndr_patp", a.Sndr.String())
	add("urbit.ames.rcvr_patp", a.Rcvr.String())
	add("urbit.ames.content_hex", hex.EncodeToString(a.Content))
}

func printable(p []byte) bool {
	for _, c := range p {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// bytesFields are shown by tshark as colon-separated hex, by the report as
// plain hex.
var bytesFields = map[string]bool{
	"urbit.mesa.name.path_hex":         true,
	"urbit.mesa.payload_name.path_hex": true,
	"urbit.mesa.data.sig":              true,
	"urbit.mesa.data.hmac":             true,
	"urbit.mesa.data.pair":             true,
	"urbit.mesa.data.frag":             true,
	"urbit.ames.content_hex":           true,
}

// hexFields are numbers both sides may write in hex ("0x0004e08c",
// "0x4e08c") or decimal.
var hexFields = map[string]bool{"urbit.mesa.head.mug": true, "urbit.ames.head.mug": true}

// normalize puts every value of m in one spelling per field type.
func normalize(m map[string][]string) map[string][]string {
	for k, vs := range m {
		for i, v := range vs {
			switch {
			case bytesFields[k]:
				vs[i] = strings.ReplaceAll(v, ":", "")
			case hexFields[k]:
				if n, err := strconv.ParseUint(v, 0, 32); err == nil {
					vs[i] = strconv.FormatUint(n, 10)
				}
			}
		}
	}
	return m
}

// diff describes how got differs from want, or returns "".
func diff(got, want map[string][]string) string {
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		g, w := got[k], want[k]
		if !slices.Equal(g, w) {
			fmt.Fprintf(&b, "\n  %s: got %q, want %q", k, clip(g), clip(w))
		}
	}
	return b.String()
}

// clip shortens long values for messages.
func clip(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		if len(v) > 80 {
			v = v[:80] + "..."
		}
		out[i] = v
	}
	return out
}

// want returns the fields the dissector must show for d, given its
// report r: the report's and the extras.
func want(d datagram, r map[string]any) map[string][]string {
	w := flattenReport(r)
	extras(d.payload, w)
	return normalize(w)
}

// checker counts and reports mismatches, up to maxReported.
type checker struct {
	t      *testing.T
	failed int
}

func (c *checker) errorf(format string, args ...any) {
	c.t.Helper()
	if c.failed++; c.failed <= maxReported {
		c.t.Errorf(format, args...)
	}
}

func (c *checker) done() {
	if c.failed > maxReported {
		c.t.Errorf("... %d mismatches in all", c.failed)
	}
}

// isSTUN reports whether the dissector leaves datagram b, with report r,
// to Wireshark's STUN dissector: `relay decode` took it for a STUN
// request, or rejected it as legacy ames and it has a STUN header (the top
// two bits zero, the magic cookie at bytes 4-7, a length field giving the
// rest, a multiple of 4).
func isSTUN(b []byte, r map[string]any) bool {
	if r["reason"] == scry.ErrAmesSTUN.Error() {
		return true
	}
	if r["protocol"] != "ames" || r["verdict"] != "reject" || len(b) < 20 {
		return false
	}
	n := int(binary.BigEndian.Uint16(b[2:]))
	return b[0]&0xc0 == 0 && string(b[4:8]) == "\x21\x12\xa4\x42" && n == len(b)-20 && n%4 == 0
}

// TestWiresharkDissectorGalaxyPort puts every vector, the reference
// ships and random noise on the galaxy port and checks that each
// datagram dissects to exactly the fields `relay decode --json` reports
// (rejects included, with vere's reason), plus the extras from the codecs;
// STUN requests go to Wireshark's STUN dissector instead.
func TestWiresharkDissectorGalaxyPort(t *testing.T) {
	e := setup(t)
	src := netip.AddrPortFrom(netip.MustParseAddr("10.0.0.2"), galaxyPort)
	dst := netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), galaxyPort+255)
	ds := append(e.vectors(t, src, dst), shipDatagrams(t, src, dst)...)
	ds = append(ds, noise(noiseDatagrams, src, dst)...)
	reports := e.decode(t, ds)
	frames := e.dissect(t, writePcap(t, t.TempDir(), ds))
	if len(frames) != len(ds) {
		t.Fatalf("tshark showed %d frames for %d datagrams", len(frames), len(ds))
	}
	c := &checker{t: t}
	var accepted, rejected, stun int
	for i, d := range ds {
		r, fr := reports[i], frames[i]
		switch {
		case r == nil:
			if len(fr.fields) != 0 {
				c.errorf("%s: empty datagram dissected: %v", d.label, fr.fields)
			}
		case isSTUN(d.payload, r):
			stun++
			if len(fr.fields) != 0 || !strings.HasSuffix(fr.protocols, ":stun") {
				c.errorf("%s: STUN request shown as %s %v", d.label, fr.protocols, fr.fields)
			}
		default:
			if r["verdict"] == "accept" {
				accepted++
			} else {
				rejected++
			}
			if !strings.HasSuffix(fr.protocols, ":urbit") {
				c.errorf("%s: protocols %s", d.label, fr.protocols)
			}
			if s := diff(normalize(fr.fields), want(d, r)); s != "" {
				c.errorf("%s (%s):%s", d.label, hex.EncodeToString(d.payload[:min(len(d.payload), 32)]), s)
			}
		}
	}
	c.done()
	t.Logf("%d datagrams: %d accepted, %d rejected, %d STUN, all as relay decode says", len(ds), accepted, rejected, stun)
	if accepted == 0 || rejected == 0 || stun == 0 {
		t.Errorf("want accepts, rejects and STUN among the inputs")
	}
}

// TestWiresharkDissectorHeuristic puts the vectors and random noise on
// ports nothing registers: the heuristic must claim exactly the datagrams
// `relay decode` accepts, with its fields, and leave every reject alone.
func TestWiresharkDissectorHeuristic(t *testing.T) {
	e := setup(t)
	src := netip.AddrPortFrom(netip.MustParseAddr("192.0.2.1"), heurPortA)
	dst := netip.AddrPortFrom(netip.MustParseAddr("192.0.2.2"), heurPortB)
	ds := append(e.vectors(t, src, dst), noise(noiseDatagrams, src, dst)...)
	reports := e.decode(t, ds)
	frames := e.dissect(t, writePcap(t, t.TempDir(), ds))
	if len(frames) != len(ds) {
		t.Fatalf("tshark showed %d frames for %d datagrams", len(frames), len(ds))
	}
	c := &checker{t: t}
	var claimed, left int
	for i, d := range ds {
		r, fr := reports[i], frames[i]
		if r == nil || r["verdict"] != "accept" {
			left++
			if len(fr.fields) != 0 || strings.Contains(fr.protocols, "urbit") {
				c.errorf("%s: heuristic claimed a datagram relay decode rejects (%v): %v", d.label, r["reason"], fr.fields)
			}
			continue
		}
		claimed++
		if s := diff(normalize(fr.fields), want(d, r)); s != "" {
			c.errorf("%s:%s", d.label, s)
		}
	}
	c.done()
	t.Logf("%d datagrams: %d claimed (every accept), %d left alone", len(ds), claimed, left)
}

// TestWiresharkDissectorFixtures reads each replay fixture as it is, with
// Wireshark's default preferences: every record the dissector shows
// matches `relay decode`, and a record it does not show is STUN or was
// taken by another dissector registered on the peer's lower port (UDP
// tries the lower port first). Those are dissected again: with
// udp.try_heuristic_first, which README.md recommends for such captures,
// every accepted one is shown; between galaxy ports, every one is.
func TestWiresharkDissectorFixtures(t *testing.T) {
	e := setup(t)
	for _, name := range e.fixtureNames(t) {
		t.Run(name, func(t *testing.T) {
			ds := e.fixture(t, name)
			reports := e.decode(t, ds)
			path := filepath.Join(e.root, "testdata", "replay", name)
			c := &checker{t: t}
			var shown int
			var taken []int // indexes of the records not shown
			for i, fr := range e.dissect(t, path) {
				d, r := ds[i], reports[i]
				if fr.srcPort != int(d.src.Port()) || fr.dstPort != int(d.dst.Port()) {
					t.Fatalf("%s: tshark shows ports %d > %d, want %v > %v", d.label, fr.srcPort, fr.dstPort, d.src, d.dst)
				}
				if len(fr.fields) == 0 {
					low := min(fr.srcPort, fr.dstPort)
					other := afterUDP(fr.protocols)
					if r != nil && !isSTUN(d.payload, r) && (low >= galaxyPort || other == "" || other == "data") {
						c.errorf("%s: not dissected (%s, ports %d > %d)", d.label, fr.protocols, fr.srcPort, fr.dstPort)
					}
					taken = append(taken, i)
					continue
				}
				shown++
				if s := diff(normalize(fr.fields), want(d, r)); s != "" {
					c.errorf("%s:%s", d.label, s)
				}
			}
			// The records others took but STUN, again: with the heuristics
			// first each the relay accepts is shown, and between galaxy
			// ports each is.
			var again []datagram
			var againReports []map[string]any
			for _, i := range taken {
				if reports[i] != nil && !isSTUN(ds[i].payload, reports[i]) {
					again = append(again, ds[i])
					againReports = append(againReports, reports[i])
				}
			}
			if len(again) > 0 {
				for i, fr := range e.dissect(t, writePcap(t, t.TempDir(), again), "udp.try_heuristic_first:TRUE") {
					accepted := againReports[i]["verdict"] == "accept"
					if s := diff(normalize(fr.fields), want(again[i], againReports[i])); accepted && s != "" {
						c.errorf("%s (heuristics first):%s", again[i].label, s)
					}
				}
				galaxy := slices.Clone(again)
				for i := range galaxy {
					galaxy[i].src = netip.AddrPortFrom(galaxy[i].src.Addr(), galaxyPort)
					galaxy[i].dst = netip.AddrPortFrom(galaxy[i].dst.Addr(), galaxyPort)
				}
				for i, fr := range e.dissect(t, writePcap(t, t.TempDir(), galaxy)) {
					if s := diff(normalize(fr.fields), want(again[i], againReports[i])); s != "" {
						c.errorf("%s (between galaxy ports):%s", again[i].label, s)
					}
				}
			}
			c.done()
			t.Logf("%d records: %d shown, %d left to STUN or to a dissector of the peer's port", len(ds), shown, len(taken))
		})
	}
}

// TestWiresharkFieldsDocumented installs the dissector as README.md says,
// in the personal plugins directory of an empty HOME, and checks that
// tshark loads it from there and that the README's field table lists
// exactly the fields it registers.
func TestWiresharkFieldsDocumented(t *testing.T) {
	e := setup(t)
	plugins := filepath.Join(e.home, ".local", "lib", "wireshark", "plugins")
	if err := os.MkdirAll(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(e.script)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plugins, "urbit.lua"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := e.tsharkCmd("-G", "fields").Output()
	if err != nil {
		t.Fatalf("tshark -G fields: %v", err)
	}
	var registered []string
	for _, line := range strings.Split(string(out), "\n") {
		// F, name, abbreviation, type, ...
		if cols := strings.Split(line, "\t"); len(cols) > 2 && cols[0] == "F" && strings.HasPrefix(cols[2], "urbit.") {
			registered = append(registered, cols[2])
		}
	}
	readme, err := os.ReadFile(filepath.Join(e.root, "docs", "wireshark", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, line := range strings.Split(string(readme), "\n") {
		if !strings.HasPrefix(line, "| `urbit.") {
			continue
		}
		parts := strings.Split(line, "`")
		for i := 1; i < len(parts); i += 2 {
			if strings.HasPrefix(parts[i], "urbit.") {
				documented = append(documented, parts[i])
			}
		}
	}
	slices.Sort(registered)
	slices.Sort(documented)
	documented = slices.Compact(documented)
	if len(registered) == 0 {
		t.Fatal("tshark did not load the dissector from the personal plugins directory")
	}
	if !slices.Equal(registered, documented) {
		t.Errorf("fields registered:\n%s\nfields in README.md's table:\n%s", strings.Join(registered, " "), strings.Join(documented, " "))
	}
}
