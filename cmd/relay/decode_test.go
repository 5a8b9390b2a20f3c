package main

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/scry"
)

// decodeVector is one line of a testdata jsonl file, kept generic.
type decodeVector map[string]any

// loadDecodeVectors reads testdata/<dir>/<file>.
func loadDecodeVectors(t *testing.T, dir, file string) []decodeVector {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "testdata", dir, file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []decodeVector
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, decodeJSON(t, sc.Bytes()))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("%s: empty", file)
	}
	return out
}

// decodeJSON decodes one JSON object, numbers as json.Number.
func decodeJSON(t *testing.T, b []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
	return m
}

// runDecodeJSON runs `relay decode --json` with the hex of vs as arguments
// (the empty datagram cannot be a stdin line: blank lines are skipped) and
// returns one decoded report per vector.
func runDecodeJSON(t *testing.T, vs []decodeVector) []map[string]any {
	t.Helper()
	args := []string{"--json"}
	for _, v := range vs {
		args = append(args, v["hex"].(string))
	}
	var stdout, stderr bytes.Buffer
	if code := runDecode(args, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if len(lines) != len(vs) {
		t.Fatalf("%d output lines for %d inputs", len(lines), len(vs))
	}
	out := make([]map[string]any, len(lines))
	for i, l := range lines {
		out[i] = decodeJSON(t, []byte(l))
	}
	return out
}

// keysOf returns the sorted keys of m.
func keysOf(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// checkSubset checks that every field of got (recursively, for objects)
// equals the same field of want.
func checkSubset(t *testing.T, label string, got, want map[string]any) {
	t.Helper()
	for k, g := range got {
		w, ok := want[k]
		if !ok {
			t.Errorf("%s: field %q not in the vector", label, k)
			continue
		}
		gm, gIsMap := g.(map[string]any)
		wm, wIsMap := w.(map[string]any)
		if gIsMap && wIsMap {
			checkSubset(t, label+"."+k, gm, wm)
			continue
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: field %q = %v, want %v", label, k, g, w)
		}
	}
}

// wantMesaKeys lists, per mesa type, the top-level fields of an accepted
// report.
var wantMesaKeys = map[string][]string{
	"page": {"data", "head", "len", "name", "next", "protocol", "type", "verdict"},
	"peek": {"head", "len", "name", "protocol", "type", "verdict"},
	"poke": {"data", "head", "len", "name", "payload_name", "protocol", "type", "verdict"},
	"resv": {"head", "len", "protocol", "type", "verdict"},
}

// checkMesaAccept checks an accepted mesa report against the vector
// fields dec.
func checkMesaAccept(t *testing.T, label string, got, dec map[string]any) {
	t.Helper()
	if got["verdict"] != "accept" || got["protocol"] != "mesa" {
		t.Errorf("%s: %v", label, got)
		return
	}
	typ, _ := dec["type"].(string)
	if ks := keysOf(got); !reflect.DeepEqual(ks, wantMesaKeys[typ]) {
		t.Errorf("%s: fields %v, want %v", label, ks, wantMesaKeys[typ])
	}
	if h, _ := got["head"].(map[string]any); len(h) != 5 {
		t.Errorf("%s: head %v", label, h)
	}
	rest := map[string]any{}
	for k, v := range got {
		if k != "verdict" && k != "protocol" {
			rest[k] = v
		}
	}
	checkSubset(t, label, rest, dec)
}

func TestDecodeMesaVectors(t *testing.T) {
	vs := loadDecodeVectors(t, "mesa", "mesa-vectors.jsonl")
	for i, got := range runDecodeJSON(t, vs) {
		checkMesaAccept(t, "vector "+vs[i]["id"].(json.Number).String(), got, vs[i])
	}
}

func TestDecodeStdin(t *testing.T) {
	// The same vectors as lines of stdin give the same reports.
	vs := loadDecodeVectors(t, "mesa", "mesa-vectors.jsonl")
	var in strings.Builder
	for _, v := range vs {
		in.WriteString(v["hex"].(string) + "\n")
	}
	var stdout, stderr bytes.Buffer
	if code := runDecode([]string{"--json"}, strings.NewReader(in.String()), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	fromArgs := runDecodeJSON(t, vs)
	if len(lines) != len(fromArgs) {
		t.Fatalf("%d lines from stdin, %d from arguments", len(lines), len(fromArgs))
	}
	for i, l := range lines {
		if got := decodeJSON(t, []byte(l)); !reflect.DeepEqual(got, fromArgs[i]) {
			t.Errorf("line %d differs from the argument form", i)
		}
	}
}

func TestDecodeMesaQuirks(t *testing.T) {
	vs := loadDecodeVectors(t, "mesa", "mesa-quirks.jsonl")
	for i, got := range runDecodeJSON(t, vs) {
		checkMesaAccept(t, "quirk "+vs[i]["id"].(json.Number).String(), got, vs[i]["decoded"].(map[string]any))
	}
}

func TestDecodeMesaMalformed(t *testing.T) {
	vs := loadDecodeVectors(t, "mesa", "mesa-malformed.jsonl")
	for i, got := range runDecodeJSON(t, vs) {
		v := vs[i]
		label := "malformed " + v["id"].(json.Number).String()
		if got["verdict"] != "reject" {
			t.Errorf("%s: verdict %v", label, got["verdict"])
		}
		if v["gate"] == "not-mesa" {
			// vere hands these to legacy ames, which rejects them too.
			if got["protocol"] != "ames" || got["reason"] == "" {
				t.Errorf("%s (not mesa): %v", label, got)
			}
			continue
		}
		if got["protocol"] != "mesa" || got["reason"] != v["reason"] {
			t.Errorf("%s: protocol %v reason %q, want mesa %q", label, got["protocol"], got["reason"], v["reason"])
		}
	}
}

func TestDecodeAmesVectors(t *testing.T) {
	vs := loadDecodeVectors(t, "ames", "ames-vectors.jsonl")
	for i, got := range runDecodeJSON(t, vs) {
		v := vs[i]
		label := "ames vector " + v["id"].(json.Number).String()
		if got["verdict"] != "accept" || got["protocol"] != "ames" {
			t.Errorf("%s: %v", label, got)
			continue
		}
		for _, k := range []string{"type", "sndr", "rcvr", "relayed", "origin", "len"} {
			if !reflect.DeepEqual(got[k], v[k]) {
				t.Errorf("%s: %s = %v, want %v", label, k, got[k], v[k])
			}
		}
	}
}

func TestDecodeBadInputContinues(t *testing.T) {
	in := "zz\n# comment\n\n0x10 8c 4e f0 00:02:e0:67\n123\n"
	var stdout, stderr bytes.Buffer
	if code := runDecode([]string{"--json"}, strings.NewReader(in), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("lines: %q", lines)
	}
	first := decodeJSON(t, []byte(lines[0]))
	if first["verdict"] != "reject" || first["input"] != "zz" || !strings.HasPrefix(first["reason"].(string), "not hex") {
		t.Errorf("bad hex: %v", first)
	}
	second := decodeJSON(t, []byte(lines[1]))
	if second["verdict"] != "accept" || second["type"] != "resv" {
		t.Errorf("spaced hex of a type 0 packet: %v", second)
	}
	if third := decodeJSON(t, []byte(lines[2])); third["verdict"] != "reject" || third["reason"] != "not hex: odd number of digits" {
		t.Errorf("odd hex: %v", third)
	}
}

func TestDecodeTextArgs(t *testing.T) {
	ship, err := lane.ParseShip("~sampel-palnet")
	if err != nil {
		t.Fatal(err)
	}
	page := scry.NewPage(
		scry.Name{Ship: ship, Rift: 2, Bloq: scry.DefaultBloq, Frag: 1, Path: []byte("c/x/1")},
		scry.Data{Total: 3, AuthKind: scry.AuthNone, Frag: []byte("abc")},
	)
	if !page.SetNextHopAddr(netip.MustParseAddrPort("127.0.0.1:13337")) {
		t.Fatal("SetNextHopAddr")
	}
	hexPage := hex.EncodeToString(page.Append(nil))
	var stdout, stderr bytes.Buffer
	if code := runDecode([]string{hexPage, "0102"}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"mesa page", "~sampel-palnet", "rift 2", "frag 1", "/c/x/1", "total 3", "auth none",
		"fragment 3 bytes", "next 127.0.0.1:13337", "reject  ames  2 bytes",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
}

func TestDecodeUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := runDecode([]string{"--bogus"}, strings.NewReader(""), &stdout, &stderr); code != exitUsage {
		t.Errorf("bad flag: exit %d", code)
	}
	if code := runDecode([]string{"--help"}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Errorf("--help: exit %d", code)
	}
}

func TestDecodeLongLine(t *testing.T) {
	in := strings.Repeat("a", maxDecodeLine+10) + "\n108c4ef00002e067\n"
	var stdout, stderr bytes.Buffer
	if code := runDecode([]string{"--json"}, strings.NewReader(in), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "line longer") || !strings.Contains(lines[1], `"accept"`) {
		t.Errorf("output %q", lines)
	}
}
