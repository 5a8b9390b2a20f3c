package pki

import (
	"encoding/binary"
	"encoding/hex"
	"testing"

	"lukechampine.com/blake3"
	"lukechampine.com/blake3/guts"

	"github.com/urbit-relay/relay/relay/pki/pkitest"
)

// blakeVectors are BLAKE3-256 hashes of the official test input (byte i is
// i mod 251) at each length, the lengths of BLAKE3's test_vectors.json;
// the values agree with that file, and TestBlake3Vectors also holds each
// to lukechampine.com/blake3 (an independent implementation, a test-only
// dependency) at run time.
var blakeVectors = []struct {
	n    int
	want string
}{
	{0, "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"},
	{1, "2d3adedff11b61f14c886e35afa036736dcd87a74d27b5c1510225d0f592e213"},
	{3, "e1be4d7a8ab5560aa4199eea339849ba8e293d55ca0a81006726d184519e647f"},
	{64, "4eed7141ea4a5cd4b788606bd23f46e212af9cacebacdc7d1f4c6dc7f2511b98"},
	{65, "de1e5fa0be70df6d2be8fffd0e99ceaa8eb6e8c93a63f2d8d1c30ecb6b263dee"},
	{1023, "10108970eeda3eb932baac1428c7a2163b0e924c9a9e25b35bba72b28f70bd11"},
	{1024, "42214739f095a406f3fc83deb889744ac00df831c10daa55189b5d121c855af7"},
	{1025, "d00278ae47eb27b34faecf67b4fe263f82d5412916c1ffd97c8cb7fb814b8444"},
	{2048, "e776b6028c7cd22a4d0ba182a8bf62205d2ef576467e838ed6f2529b85fba24a"},
	{2049, "5f4d72f40d7a5f82b15ca2b2e44b1de3c2ef86c426c95c1af0b6879522563030"},
	{3072, "b98cb0ff3623be03326b373de6b9095218513e64f1ee2edd2525c7ad1e5cffd2"},
	{3073, "7124b49501012f81cc7f11ca069ec9226cecb8a2c850cfe644e327d22d3e1cd3"},
	{4096, "015094013f57a5277b59d8475c0501042c0b642e531b0a1c8f58d2163229e969"},
	{4097, "9b4052b38f1c5fc8b1f9ff7ac7b27cd242487b3d890d15c96a1c25b8aa0fb995"},
	{5121, "628bd2cb2004694adaab7bbd778a25df25c47b9d4155a55f8fbd79f2fe154cff"},
	{8193, "bab6c09cb8ce8cf459261398d2e7aef35700bf488116ceb94a36d0f5f1b7bc3b"},
	{16384, "f875d6646de28985646f34ee13be9a576fd515f76b5b0a26bb324735041ddde4"},
	{31744, "62b6960e1a44bcc1eb1a611a8d6235b6b4b78f32e7abc4fb4c6cdcce94895c47"},
}

func blakeInput(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

// TestBlake3Vectors holds compress, chunkCV and parentCV to BLAKE3: the
// standard hash is the tree's top node compressed with ROOT. Each length
// is checked against the table and against lukechampine.com/blake3.
func TestBlake3Vectors(t *testing.T) {
	for _, v := range blakeVectors {
		in := blakeInput(v.n)
		got := subtreeCV(in, 0, flagRoot)
		if hex.EncodeToString(got[:]) != v.want {
			t.Errorf("blake3(%d bytes) = %x, want %s", v.n, got, v.want)
		}
		if ind := blake3.Sum256(in); got != ind {
			t.Errorf("blake3(%d bytes) = %x, lukechampine.com/blake3 says %x", v.n, got, ind)
		}
	}
	abc := chunkCV([]byte("abc"), 0, flagRoot)
	if hex.EncodeToString(abc[:]) != "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85" {
		t.Errorf("blake3(abc) = %x", abc)
	}
}

// gutsHash is a chaining value as lukechampine.com/blake3/guts returns it,
// written as bytes.
func gutsHash(cv [8]uint32) (h hash) {
	for i, w := range cv {
		binary.LittleEndian.PutUint32(h[4*i:], w)
	}
	return h
}

// gutsWords is the inverse of gutsHash.
func gutsWords(h *hash) (cv [8]uint32) {
	for i := range cv {
		cv[i] = binary.LittleEndian.Uint32(h[4*i:])
	}
	return cv
}

// indLeaf is a leaf's chaining value (no ROOT) computed by
// lukechampine.com/blake3/guts: the independent twin of chunkCV(_, _, 0).
func indLeaf(chunk []byte, counter uint64) hash {
	return gutsHash(guts.ChainingValue(guts.CompressChunk(chunk, &guts.IV, counter, 0)))
}

// indParent is a parent's chaining value (no ROOT) computed by
// lukechampine.com/blake3/guts.
func indParent(l, r hash) hash {
	return gutsHash(guts.ChainingValue(guts.ParentNode(gutsWords(&l), gutsWords(&r), &guts.IV, 0)))
}

// TestChainingValues holds chunkCV and parentCV without ROOT, the hashes a
// proof is made of, to lukechampine.com/blake3/guts: chunks of every
// block boundary, counters past 2^32.
func TestChainingValues(t *testing.T) {
	in := blakeInput(chunkLen)
	for _, n := range []int{0, 1, 63, 64, 65, 127, 128, 129, 1023, 1024} {
		for _, ctr := range []uint64{0, 1, 2, 7, 1<<32 + 5} {
			if got, want := chunkCV(in[:n], ctr, 0), indLeaf(in[:n], ctr); got != want {
				t.Errorf("chunkCV(%d bytes, counter %d) = %x, guts %x", n, ctr, got, want)
			}
		}
	}
	l, r := chunkCV(in[:10], 0, 0), chunkCV(in[10:99], 1, 0)
	if got, want := parentCV(&l, &r, 0), indParent(l, r); got != want {
		t.Errorf("parentCV = %x, guts %x", got, want)
	}
}

// TestMesaRootIsBlake3 holds the root the verifier computes to what arvo
// signs: BLAKE3 of the message (zuse's +root:lss), for one leaf
// (leafRoot) and for a proof's fold (proofRoot, zuse's +recover-root),
// every leaf count up to 70 and lengths that end mid-leaf; the proof
// appendProof makes has proofLen hashes and each equals the independent
// one (pkitest.Proof). vere's lss_root fold (no ROOT) is checked to differ: it is not the
// value signed.
func TestMesaRootIsBlake3(t *testing.T) {
	for _, n := range []int{0, 1, 5, 64, 1000, 1023, 1024} {
		msg := blakeInput(n)
		if got, want := leafRoot(msg), hash(blake3.Sum256(msg)); got != want {
			t.Errorf("leafRoot(%d bytes) = %x, BLAKE3 %x", n, got, want)
		}
	}
	for leaves := 2; leaves <= 70; leaves++ {
		for _, tail := range []int{0, 1, 1023} {
			n := (leaves-1)*chunkLen + tail
			if tail == 0 {
				n = leaves * chunkLen
			}
			msg := blakeInput(n)
			proof := appendProof(nil, msg)
			if got, want := len(proof)/HashLen, proofLen(uint64(leaves)); got != want {
				t.Fatalf("%d leaves: proof has %d hashes, proofLen says %d", leaves, got, want)
			}
			if ind := pkitest.Proof(msg); string(proof) != string(ind) {
				t.Fatalf("%d bytes: proof %x\nguts       %x", n, proof, ind)
			}
			want := hash(blake3.Sum256(msg))
			if got := proofRoot(proof); got != want {
				t.Fatalf("%d bytes: proofRoot %x, BLAKE3 %x", n, got, want)
			}
			if vere := vereRoot(proof); vere == want {
				t.Fatalf("%d bytes: vere's lss_root fold equals BLAKE3", n)
			}
		}
	}
}

// vereRoot is vere's lss_root (lss.c): the same fold with no ROOT flag.
// Nothing signs it; it is here only to show that it differs.
func vereRoot(proof []byte) hash {
	var root hash
	copy(root[:], proof)
	for i := HashLen; i+HashLen <= len(proof); i += HashLen {
		var r hash
		copy(r[:], proof[i:])
		root = indParent(root, r)
	}
	return root
}
