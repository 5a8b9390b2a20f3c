package pki

import (
	"encoding/hex"
	"testing"
)

// blakeVectors are BLAKE3-256 hashes of the official test input (byte i is
// i mod 251) at each length, the lengths of BLAKE3's test_vectors.json;
// the values were printed by lukechampine.com/blake3 v1.4.1, an
// independent implementation, and agree with that file where it has them.
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
// standard hash is the tree's top node compressed with ROOT.
func TestBlake3Vectors(t *testing.T) {
	for _, v := range blakeVectors {
		got := subtreeCV(blakeInput(v.n), 0, flagRoot)
		if hex.EncodeToString(got[:]) != v.want {
			t.Errorf("blake3(%d bytes) = %x, want %s", v.n, got, v.want)
		}
	}
	abc := chunkCV([]byte("abc"), 0, flagRoot)
	if hex.EncodeToString(abc[:]) != "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85" {
		t.Errorf("blake3(abc) = %x", abc)
	}
}

// TestMesaRootIsNotBlake3 pins that mesa's root leaves out ROOT: for one
// leaf it differs from the BLAKE3 hash of the same bytes.
func TestMesaRootIsNotBlake3(t *testing.T) {
	msg := blakeInput(100)
	if leafRoot(msg) == subtreeCV(msg, 0, flagRoot) {
		t.Fatal("leafRoot equals the BLAKE3 hash; mesa's root has no ROOT flag")
	}
}

// TestProofRoot: folding a publisher's proof gives the tree's root, for
// every leaf count up to 70 and for lengths that end mid-leaf; the proof
// has proofLen hashes.
func TestProofRoot(t *testing.T) {
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
			if got, want := proofRoot(proof), subtreeCV(msg, 0, 0); got != want {
				t.Fatalf("%d bytes: proofRoot %x, tree root %x", n, got, want)
			}
		}
	}
}
