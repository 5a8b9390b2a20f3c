package pki

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"strings"
	"testing"

	"lukechampine.com/blake3"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/scry"
)

// The vectors below are transcribed from urbit/urbit's own tests, at
// commit 109fbbbaf8 (2025-09-22; tests/lib/lss.hoon and the zuse.hoon it
// tests are unchanged since 000ecc3f8426, the commit docs/protocol.md
// cites). Hoon writes a hash as an atom, most significant byte first, so
// its hex is the byte-reverse of the digest (hoonHex undoes that).

// hoonHex reads a Hoon @ux literal ("0x6232.1fe4...") as the atom's bytes
// low first, n bytes: the bytes the atom stands for on the wire.
func hoonHex(t testing.TB, lit string, n int) []byte {
	t.Helper()
	s := strings.ReplaceAll(strings.TrimPrefix(lit, "0x"), ".", "")
	if len(s)%2 == 1 {
		s = "0" + s
	}
	be, err := hex.DecodeString(s)
	if err != nil || len(be) > n {
		t.Fatalf("bad literal %q", lit)
	}
	le := make([]byte, n)
	for i, b := range be {
		le[len(be)-1-i] = b
	}
	return le
}

// rawHex reads a Hoon literal whose hex is already in byte order (the
// raw vectors of ed25519.hoon, which swp-vec reverses into atoms).
func rawHex(t testing.TB, lit string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(strings.TrimPrefix(lit, "0x"), ".", ""))
	if err != nil {
		t.Fatalf("bad literal %q", lit)
	}
	return b
}

// TestUrbitLssVectors transcribes tests/lib/lss.hoon (test-builder-*,
// lines 5-99; test-verify-*, lines 101-150). Its messages are "" (0^0),
// 'foo' (3^'foo'), and 2047, 3071 and 4095 zero bytes (2.047^0 ...); each
// test expects root = (blake3 32 msg) and, for two or more leaves, the
// proof listed below, each hash an (output-cv (chunk-output i leaf)) or a
// parent of two. The leaf and parent hashes are computed here by
// lukechampine.com/blake3/guts, the root by lukechampine.com/blake3.
func TestUrbitLssVectors(t *testing.T) {
	z := func(n int) []byte { return make([]byte, n) }
	leaf := func(i uint64, n int) hash { return indLeaf(z(n), i) }
	cases := []struct {
		name  string
		line  int
		msg   []byte
		proof []hash // nil: one leaf or none, no proof
	}{
		{"test-builder-empty", 5, nil, nil},
		{"test-builder-foo", 16, []byte("foo"), nil},
		{"test-builder-two", 28, z(2047), []hash{leaf(0, 1024), leaf(1, 1023)}},
		{"test-builder-three", 47, z(3071), []hash{leaf(0, 1024), leaf(1, 1024), leaf(2, 1023)}},
		{"test-builder-four", 68, z(4095), []hash{leaf(0, 1024), leaf(1, 1024), indParent(leaf(2, 1024), leaf(3, 1023))}},
	}
	for _, c := range cases {
		want := hash(blake3.Sum256(c.msg))
		if c.proof == nil {
			if got := leafRoot(c.msg); got != want {
				t.Errorf("%s (lss.hoon:%d): root %x, want (blake3 32 msg) %x", c.name, c.line, got, want)
			}
			continue
		}
		var wantProof []byte
		for _, h := range c.proof {
			wantProof = append(wantProof, h[:]...)
		}
		proof := appendProof(nil, c.msg)
		if !bytes.Equal(proof, wantProof) {
			t.Errorf("%s (lss.hoon:%d): proof %x\nwant %x", c.name, c.line, proof, wantProof)
		}
		if got := proofRoot(wantProof); got != want {
			t.Errorf("%s (lss.hoon:%d): root of the proof %x, want (blake3 32 msg) %x", c.name, c.line, got, want)
		}
	}
}

// TestUrbitBlake3Vectors transcribes the 32-byte unkeyed cases of
// +test-blake3 in tests/sys/zuse/crypto/blake.hoon (lines 117-160; the
// input is +blake3-test-msg, line 112: byte i is i mod 251, as
// blakeInput). 31744 bytes is 31 leaves, so the last one is also a
// message's root through its proof.
func TestUrbitBlake3Vectors(t *testing.T) {
	for _, v := range []struct {
		n    int
		want string
	}{
		{0, "0x6232.1fe4.ca93.9acc.b712.c1ad.c925.cb9b.49c9.dc36.ea4d.40a0.a6a1.f9f5.b949.13af"},
		{1, "0x13e2.92f5.d025.0251.c1b5.274d.a787.cd6d.7336.a0af.356e.884c.f161.1bf1.dfde.3a2d"},
		{1024, "0xf75a.851c.125d.9b18.55aa.0dc1.31f8.0dc0.4a74.89b8.de83.fcf3.06a4.95f0.3947.2142"},
		{31744, "0x475c.8994.cedc.6c4c.fbc4.abe7.328f.b7b4.b635.628d.1a61.1aeb.c1bc.441a.0e96.b662"},
	} {
		var want hash
		copy(want[:], hoonHex(t, v.want, HashLen))
		msg := blakeInput(v.n)
		got := leafRoot(msg)
		if v.n > chunkLen {
			got = proofRoot(appendProof(nil, msg))
		}
		if got != want {
			t.Errorf("blake.hoon, %d bytes: root %x, want %x", v.n, got, want)
		}
		if ind := hash(blake3.Sum256(msg)); ind != want {
			t.Errorf("blake.hoon, %d bytes: lukechampine.com/blake3 %x, want %x", v.n, ind, want)
		}
	}
}

// TestUrbitEd25519Vectors transcribes the first three vectors of
// tests/sys/zuse/crypto/ed25519.hoon (+vectors-raw, lines 102-137: RFC
// 8032 section 7.1, tests 1-3). +swp-vec (line 96) reverses each into the
// atom +sign-octs and +veri-octs take, so the atoms' bytes, low first, are
// these bytes in order: the seed, the public key and the 64-byte R||S
// signature are RFC 8032's, which crypto/ed25519 reads.
func TestUrbitEd25519Vectors(t *testing.T) {
	for i, v := range []struct{ seed, pk, msg, sig string }{
		{"0x9d61.b19d.effd.5a60.ba84.4af4.92ec.2cc4.4449.c569.7b32.6919.703b.ac03.1cae.7f60",
			"0xd75a.9801.82b1.0ab7.d54b.fed3.c964.073a.0ee1.72f3.daa6.2325.af02.1a68.f707.511a",
			"",
			"0xe556.4300.c360.ac72.9086.e2cc.806e.828a.8487.7f1e.b8e5.d974.d873.e065.2249.0155.5fb8.8215.90a3.3bac.c61e.3970.1cf9.b46b.d25b.f5f0.595b.be24.6551.4143.8e7a.100b"},
		{"0x4ccd.089b.28ff.96da.9db6.c346.ec11.4e0f.5b8a.319f.35ab.a624.da8c.f6ed.4fb8.a6fb",
			"0x3d40.17c3.e843.895a.92b7.0aa7.4d1b.7ebc.9c98.2ccf.2ec4.968c.c0cd.55f1.2af4.660c",
			"0x72",
			"0x92a0.09a9.f0d4.cab8.720e.820b.5f64.2540.a2b2.7b54.1650.3f8f.b376.2223.ebdb.69da.085a.c1e4.3e15.996e.458f.3613.d0f1.1d8c.387b.2eae.b430.2aee.b00d.2916.12bb.0c00"},
		{"0xc5aa.8df4.3f9f.837b.edb7.442f.31dc.b7b1.66d3.8535.076f.094b.85ce.3a2e.0b44.58f7",
			"0xfc51.cd8e.6218.a1a3.8da4.7ed0.0230.f058.0816.ed13.ba33.03ac.5deb.9115.4890.8025",
			"0xaf82",
			"0x6291.d657.deec.2402.4827.e69c.3abe.01a3.0ce5.48a2.8474.3a44.5e36.80d7.db5a.c3ac.18ff.9b53.8d16.f290.ae67.f760.984d.c659.4a7c.15e9.716e.d28d.c027.bece.ea1e.c40a"},
	} {
		seed, pk, sig := rawHex(t, v.seed), rawHex(t, v.pk), rawHex(t, v.sig)
		var msg []byte
		if v.msg != "" {
			msg = rawHex(t, v.msg)
		}
		priv := ed25519.NewKeyFromSeed(seed)
		if got := priv.Public().(ed25519.PublicKey); !bytes.Equal(got, pk) {
			t.Errorf("vector %d: public key %x, want %x", i+1, got, pk)
		}
		if got := ed25519.Sign(priv, msg); !bytes.Equal(got, sig) {
			t.Errorf("vector %d: signature %x, want %x", i+1, got, sig)
		}
		if !ed25519.Verify(pk, msg, sig) {
			t.Errorf("vector %d: does not verify", i+1)
		}
	}
}

// TestPageAsArvoSignsIt builds first pages as ames.hoon makes them, with
// nothing from this package but the snapshot: +peek-publ signs
// (etch-binding (en-beam bem) (root:lss (met 3 ser)^ser)), the text
// "/~sampel-palnet//1/<path>" then BLAKE3(ser) (lukechampine.com/blake3);
// +peek-mess puts ser on a one-leaf page and +build:lss's proof (guts) on
// a longer message's. Each must verify, and NewSignedPage must make the
// same bytes.
func TestPageAsArvoSignsIt(t *testing.T) {
	ship, err := lane.ParseShip("~sampel-palnet")
	if err != nil {
		t.Fatal(err)
	}
	alice := newTestShip(t, ship, 3)
	v := NewVerifier(snapshotOf(t, alice))
	const path = "publ/1/g/x/0/hood//ping"
	for _, n := range []int{1, 5, 1023, 1024, 1025, 2047, 4095, 5*chunkLen + 7, 31744} {
		msg := blakeInput(n)
		msg[n-1] = 0xff // a jammed noun's last byte is never 0
		pkt := arvoPage(t, alice.priv, "~sampel-palnet", scry.Name{Ship: ship, Path: []byte(path)}, msg)
		if got := v.VerifyBytes(pkt); got != ReasonVerified {
			t.Errorf("%d bytes: %v, want verified", n, got)
		}
		if ours := alice.signedPage(path, msg); !bytes.Equal(ours, pkt) {
			t.Errorf("%d bytes: NewSignedPage differs from the page arvo makes", n)
		}
	}
}
