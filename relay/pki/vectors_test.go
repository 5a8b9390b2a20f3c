package pki

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// vereRecord is the part of a vector of testdata/mesa/mesa-vectors.jsonl
// the verifier reads: the wire bytes, and the fields as vere's parser
// printed them.
type vereRecord struct {
	Hex  string
	Type string
	Name struct {
		Init bool
		Bloq int
	}
	Data struct {
		Auth    string
		Total   string
		FragLen int `json:"frag_len"`
	}
}

// TestVereVectors runs the datagrams vere's own codec wrote through the
// verifier with no snapshot, and holds each verdict to one worked out from
// the fields vere's parser printed: not a page, not a first page, not
// signed, fields that do not fit (bloq, an empty message, a one-leaf
// fragment longer than the message, a proof of the wrong length), or else
// the key lookup (unknown_ship). Their authenticators are random, so none
// can verify.
func TestVereVectors(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "testdata", "mesa", "mesa-vectors.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	v := NewVerifier(nil)
	seen := map[Reason]int{}
	for sc.Scan() {
		var rec vereRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		b, err := hex.DecodeString(rec.Hex)
		if err != nil {
			t.Fatal(err)
		}
		total, err := strconv.ParseUint(rec.Data.Total, 10, 64)
		if rec.Type == "page" && err != nil {
			t.Fatalf("total %q: %v", rec.Data.Total, err)
		}
		leaves := (total + chunkLen - 1) / chunkLen
		var want Reason
		switch {
		case rec.Type != "page":
			want = ReasonMalformed
		case !rec.Name.Init:
			want = ReasonNotFirst
		case rec.Data.Auth != "sign":
			want = ReasonNotSigned
		case rec.Name.Bloq != 13 || total == 0,
			leaves == 1 && uint64(rec.Data.FragLen) > total,
			leaves > 1 && rec.Data.FragLen != proofLen(leaves)*HashLen:
			want = ReasonMalformed
		default:
			want = ReasonUnknownShip
		}
		if got := v.VerifyBytes(b); got != want {
			t.Errorf("%s page (init %v, auth %s, bloq %d, total %d, fragment %d bytes): %v, want %v",
				rec.Type, rec.Name.Init, rec.Data.Auth, rec.Name.Bloq, total, rec.Data.FragLen, got, want)
		}
		seen[want]++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, r := range []Reason{ReasonMalformed, ReasonNotFirst, ReasonNotSigned} {
		if seen[r] == 0 {
			t.Errorf("no vector reached %v", r)
		}
	}
	t.Logf("verdicts over vere's vectors: %v", seen)
}
