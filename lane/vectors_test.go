package lane

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"
)

// readJSONL decodes every line of a JSON-lines file into a fresh T.
func readJSONL[T any](t *testing.T, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<22)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no vectors", path)
	}
	return out
}

// amesVector is the part of testdata/ames/ames-vectors.jsonl these tests use.
type amesVector struct {
	ID      int    `json:"id"`
	Hex     string `json:"hex"`
	Relayed bool   `json:"relayed"`
	Origin  *struct {
		IP   string `json:"ip"`
		Port uint16 `json:"port"`
	} `json:"origin"`
	OriginHex string `json:"origin_hex"`
	Sndr      string `json:"sndr"`
	Rcvr      string `json:"rcvr"`
	SndrLen   int    `json:"sndr_len"`
	RcvrLen   int    `json:"rcvr_len"`
}

// mesaVector is the part of testdata/mesa/mesa-vectors.jsonl these tests use.
type mesaVector struct {
	ID   int `json:"id"`
	Next *struct {
		Type string `json:"type"`
		Raw  string `json:"raw"`
		IP   string `json:"ip"`
		Port uint16 `json:"port"`
	} `json:"next"`
}

const (
	amesVectorsPath = "../testdata/ames/ames-vectors.jsonl"
	mesaVectorsPath = "../testdata/mesa/mesa-vectors.jsonl"
)
