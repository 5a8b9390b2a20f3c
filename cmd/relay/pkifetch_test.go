package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/pki"
	"github.com/urbit-relay/relay/relay/pki/pkitest"
	"github.com/urbit-relay/relay/scry"
)

// RFC 8032 section 7.1's test 1 key: the ship's authentication key in
// these tests.
const (
	fetchSeed = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"
	fetchPub  = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
)

// onChain is a point as the test endpoints hold it.
type onChain struct {
	active            bool
	suite, life, rift uint32
	crypt, auth       [32]byte // bytes32, as the contract stores them
}

// chainKey is the bytes32 for an ed25519 key: the atom of its bytes,
// written big-endian (gen/key.hoon's render-hex-bytes).
func chainKey(t testing.TB, key string) (w [32]byte) {
	b, err := hex.DecodeString(key)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		w[31-i] = b[i]
	}
	return w
}

// fakeChain is the table both test endpoints answer from, by ship number.
func fakeChain(t testing.TB) map[uint32]onChain {
	var crypt [32]byte
	crypt[0] = 0x42
	return map[uint32]onChain{
		0:           {active: true, suite: 1, life: 4, rift: 2, crypt: crypt, auth: chainKey(t, fetchPub)},                 // ~zod
		0x100:       {active: true, suite: 1, life: 1, rift: 0, crypt: crypt, auth: chainKey(t, strings.Repeat("ab", 32))}, // ~marzod
		0x0101_0203: {active: false},                                                                                       // 16843267: spawned, never keyed                                                                                       // never keyed
	}
}

// ethWords is points(uint32)'s answer as the ABI encodes Azimuth.sol's
// Point (without its array): crypt, auth, hasSponsor, active,
// escapeRequested, sponsor, escapeRequestedTo, suite, life, rift.
func ethWords(p onChain) string {
	b := 0
	if p.active {
		b = 1
	}
	return "0x" + hex.EncodeToString(p.crypt[:]) + hex.EncodeToString(p.auth[:]) +
		fmt.Sprintf("%064x%064x%064x%064x%064x%064x%064x%064x", 1, b, 0, 0, 0, p.suite, p.life, p.rift)
}

type testRPCReq struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// rpcServer answers JSON-RPC batches with answer, in reverse order (a
// batch's answers need not keep the requests' order). It counts batches.
func rpcServer(t *testing.T, answer func(r testRPCReq) (result any, errMsg string)) (*httptest.Server, *atomic.Int32) {
	var batches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		batches.Add(1)
		body, _ := io.ReadAll(r.Body)
		var reqs []testRPCReq
		if err := json.Unmarshal(body, &reqs); err != nil || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "bad batch", http.StatusBadRequest)
			return
		}
		var out []map[string]any
		for i := len(reqs) - 1; i >= 0; i-- {
			q := reqs[i]
			res, msg := answer(q)
			m := map[string]any{"jsonrpc": "2.0", "id": q.ID}
			if msg != "" {
				m["error"] = map[string]any{"code": -32000, "message": msg}
			} else {
				m["result"] = res
			}
			out = append(out, m)
		}
		json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	return srv, &batches
}

// ethAnswer is an Ethereum endpoint holding chain at contract: it checks
// each call is eth_call of points(uint32) on the contract at "latest".
func ethAnswer(t *testing.T, chain map[uint32]onChain) func(testRPCReq) (any, string) {
	return func(q testRPCReq) (any, string) {
		var params []json.RawMessage
		var call struct{ To, Data string }
		var block string
		if q.Method != "eth_call" || json.Unmarshal(q.Params, &params) != nil || len(params) != 2 ||
			json.Unmarshal(params[0], &call) != nil || json.Unmarshal(params[1], &block) != nil {
			t.Errorf("request %s %s", q.Method, q.Params)
			return nil, "bad request"
		}
		if !strings.EqualFold(call.To, pki.AzimuthMainnet) || block != "latest" {
			t.Errorf("call to %s at %s", call.To, block)
		}
		d, _ := hex.DecodeString(strings.TrimPrefix(call.Data, "0x"))
		if len(d) != 36 || !bytes.Equal(d[:4], []byte{0x63, 0xfa, 0x9a, 0x87}) || !bytes.Equal(d[4:32], make([]byte, 28)) {
			t.Errorf("call data %s", call.Data)
			return nil, "bad call"
		}
		n := uint32(d[32])<<24 | uint32(d[33])<<16 | uint32(d[34])<<8 | uint32(d[35])
		return ethWords(chain[n]), "" // a point never spawned reads as zeros
	}
}

// rollerAnswer is a roller holding chain: getPoint {"ship": @p}, answered
// in the shape +point:take:dawn reads; ~fipfes-fipfes is refused with an error.
func rollerAnswer(t *testing.T, chain map[uint32]onChain) func(testRPCReq) (any, string) {
	return func(q testRPCReq) (any, string) {
		var params struct{ Ship string }
		if q.Method != "getPoint" || json.Unmarshal(q.Params, &params) != nil {
			t.Errorf("request %s %s", q.Method, q.Params)
			return nil, "bad request"
		}
		ship, err := lane.ParseShip(params.Ship)
		if err != nil || !strings.HasPrefix(params.Ship, "~") {
			t.Errorf("ship %q", params.Ship)
			return nil, "bad ship"
		}
		if params.Ship == "~fipfes-fipfes" {
			return nil, "point not found"
		}
		n, _ := ship.Uint64()
		p := chain[uint32(n)]
		res := map[string]any{"dominion": "l2", "ownership": map[string]any{}}
		if p.active {
			res["network"] = map[string]any{
				"rift":    fmt.Sprint(p.rift),
				"keys":    map[string]any{"life": fmt.Sprint(p.life), "suite": fmt.Sprint(p.suite), "auth": "0x" + hex.EncodeToString(p.auth[:]), "crypt": "0x" + hex.EncodeToString(p.crypt[:])},
				"sponsor": map[string]any{"has": true, "who": "~zod"},
			}
		}
		return res, ""
	}
}

// TestPKIFetch: relay pki fetch writes, from either source, a snapshot
// that relay run --pki loads and whose keys verify a page signed with the
// key the chain holds; ships without keys are skipped and counted.
func TestPKIFetch(t *testing.T) {
	chain := fakeChain(t)
	for _, src := range []string{"eth", "roller"} {
		t.Run(src, func(t *testing.T) {
			answer := ethAnswer(t, chain)
			if src == "roller" {
				answer = rollerAnswer(t, chain)
			}
			srv, batches := rpcServer(t, answer)
			dir := t.TempDir()
			ships := filepath.Join(dir, "ships.txt")
			os.WriteFile(ships, []byte("# ships\n~marzod\n\n~sampel-palnet\n~zod\n"), 0o600)
			out := filepath.Join(dir, "keys.txt")
			var stdout, stderr bytes.Buffer
			code := run([]string{"pki", "fetch", "--" + src, srv.URL, "--ships", ships, "--batch", "2", "--out", out, "~zod", "16843267"}, nil, &stdout, &stderr)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			if n := batches.Load(); n != 2 { // 4 ships (~zod is named twice), batches of 2
				t.Errorf("%d batches, want 2", n)
			}
			if !strings.Contains(stderr.String(), "2 ships written, 2 without networking keys skipped") {
				t.Errorf("stderr %q", stderr.String())
			}
			b, _ := os.ReadFile(out)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			if len(lines) != 4 || !strings.HasPrefix(lines[0], "# relay pki fetch: 2 of 4 ships") ||
				!strings.HasPrefix(lines[2], "~marzod 1 0 62") || !strings.HasPrefix(lines[3], "~zod 4 2 62"+reverseHex(t, chain[0].auth)) {
				t.Fatalf("snapshot:\n%s", b)
			}
			snap, err := pki.Load(out, 0)
			if err != nil || snap.Len() != 2 {
				t.Fatalf("load: %v", err)
			}
			seed, _ := hex.DecodeString(fetchSeed)
			p, err := pkitest.NewSignedPage(ed25519.NewKeyFromSeed(seed), scry.Name{Ship: lane.ShipFromUint64(0), Rift: 2, Path: []byte("publ/4/g/x/0/hood//ping")}, []byte("hi"))
			if err != nil {
				t.Fatal(err)
			}
			if got := pki.NewVerifier(snap).VerifyBytes(p.Append(nil)); got != pki.ReasonVerified {
				t.Fatalf("~zod's page: %v", got)
			}
		})
	}
}

// reverseHex is the hex of w's bytes reversed: the key as a pass holds it.
func reverseHex(t testing.TB, w [32]byte) string {
	var b [32]byte
	for i := range w {
		b[31-i] = w[i]
	}
	return hex.EncodeToString(b[:])
}

// TestPKIFetchErrors: a ship the endpoint refuses, an endpoint that
// fails, and ships that are not Azimuth points write nothing; the old
// snapshot stays.
func TestPKIFetchErrors(t *testing.T) {
	chain := fakeChain(t)
	roller, _ := rpcServer(t, rollerAnswer(t, chain))
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusBadGateway)
	}))
	defer broken.Close()
	garbled, _ := rpcServer(t, func(testRPCReq) (any, string) { return "0x1234", "" })
	dir := t.TempDir()
	out := filepath.Join(dir, "keys.txt")
	os.WriteFile(out, []byte("# old\n"), 0o600)
	for _, c := range []struct {
		name string
		args []string
		code int
	}{
		{"ship refused", []string{"--roller", roller.URL, "~zod", "~fipfes-fipfes"}, 1},
		{"endpoint down", []string{"--roller", broken.URL, "~zod"}, 1},
		{"eth answer too short", []string{"--eth", garbled.URL, "~zod"}, 1},
		{"moon", []string{"--roller", roller.URL, "~doznec-dozzod-dozzod"}, exitUsage},
		{"comet", []string{"--roller", roller.URL, "~dasres-ragnep-lislyt-ribpyl--mosnyx-bisdem-nidful-marzod"}, exitUsage},
		{"both sources", []string{"--roller", roller.URL, "--eth", roller.URL, "~zod"}, exitUsage},
		{"no ships", []string{"--roller", roller.URL}, exitUsage},
		{"bad contract", []string{"--eth", roller.URL, "--contract", "0x12", "~zod"}, exitUsage},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"pki", "fetch", "--out", out}, c.args...)
		if code := run(args, nil, &stdout, &stderr); code != c.code {
			t.Errorf("%s: exit %d, want %d (%s)", c.name, code, c.code, stderr.String())
		}
		if b, _ := os.ReadFile(out); string(b) != "# old\n" {
			t.Fatalf("%s: snapshot changed to %q", c.name, b)
		}
	}
	// The honest twin: the same roller and file, good ships only.
	var stdout, stderr bytes.Buffer
	if code := run([]string{"pki", "fetch", "--out", out, "--roller", roller.URL, "--galaxies", "~zod"}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if snap, err := pki.Load(out, 0); err != nil || snap.Len() != 1 { // of the 256 galaxies only ~zod has keys here
		t.Fatalf("load: %v", err)
	}
	if !strings.Contains(stderr.String(), "1 ships written, 255 without networking keys skipped") {
		t.Errorf("stderr %q", stderr.String())
	}
}
