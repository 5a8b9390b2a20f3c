package scry

import "testing"

// TestMugVectors checks Mug against the values in vere's
// pkg/noun/retrieve_tests.c, as quoted in ../shared/reference/mesa/README.md.
func TestMugVectors(t *testing.T) {
	for _, tc := range []struct {
		in   []byte
		want uint32
	}{
		{nil, 0x79ff04e8},
		{[]byte{1}, 0x715c2a60},
		{[]byte{2}, 0x718b9468},
		{[]byte("Hello, world!"), 0x4d441035},
	} {
		if got := Mug(tc.in); got != tc.want {
			t.Errorf("Mug(%q) = %#x, want %#x", tc.in, got, tc.want)
		}
	}
}

func TestMugAllocatesNothing(t *testing.T) {
	b := make([]byte, 1464)
	if n := testing.AllocsPerRun(100, func() { Mug(b) }); n != 0 {
		t.Fatalf("Mug allocates %v times per call", n)
	}
}

// TestMugResume: resuming from the state after any 4-byte-aligned prefix
// gives Mug of the whole.
func TestMugResume(t *testing.T) {
	b := make([]byte, 300)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	for n := 0; n <= len(b); n += 13 {
		for k := 0; k <= n; k += 4 {
			if got, want := mugResume(mugPrefix(b[:k]), k, b[:n]), Mug(b[:n]); got != want {
				t.Fatalf("len %d prefix %d: %#x, want %#x", n, k, got, want)
			}
		}
	}
}
