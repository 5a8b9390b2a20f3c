package pki

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/scry"
)

// rfcSeed and rfcPub are RFC 8032 section 7.1's test 1 key (also
// ed25519.hoon's first vector, TestUrbitEd25519Vectors).
const (
	rfcSeed = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"
	rfcPub  = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
)

// chainWord is a key as the contract holds it for an ed25519 key whose
// bytes are key: the atom (key's bytes, low first) written big-endian, as
// gen/key.hoon prints it for the chain ((render-hex-bytes 32 sgn), x-co).
func chainWord(t testing.TB, key string) (w [32]byte) {
	t.Helper()
	b, err := hex.DecodeString(key)
	if err != nil || len(b) != 32 {
		t.Fatalf("key %q", key)
	}
	for i := range b {
		w[31-i] = b[i]
	}
	return w
}

// TestPassFromChain holds PassFromChain to +pass-from-eth computed as
// numbers: 'b' + aut*2^8 + enc*2^264, aut and enc the bytes32 read
// big-endian (+decode-results), the pass the atom's bytes low first.
func TestPassFromChain(t *testing.T) {
	var crypt, auth [32]byte
	for i := range auth {
		auth[i], crypt[i] = byte(i+1), byte(0xf0-i)
	}
	n := new(big.Int).SetBytes(crypt[:])
	n.Lsh(n, 256).Add(n, new(big.Int).SetBytes(auth[:]))
	n.Lsh(n, 8).Add(n, big.NewInt('b'))
	be := n.FillBytes(make([]byte, PassLen))
	var want Pass
	for i := range be {
		want[i] = be[PassLen-1-i]
	}
	if got := PassFromChain(&crypt, &auth); got != want {
		t.Fatalf("pass %x\nwant %x", got, want)
	}
}

// abiWords builds points(uint32)'s answer word by word, as the ABI
// encodes the Point struct's fields (Azimuth.sol): two bytes32, three
// bools, five uint32, each right-aligned in 32 bytes.
func abiWords(crypt, auth [32]byte, hasSponsor, active, escape bool, sponsor, escapeTo, suite, life, rift uint32) string {
	var sb strings.Builder
	sb.WriteString("0x")
	sb.WriteString(hex.EncodeToString(crypt[:]))
	sb.WriteString(hex.EncodeToString(auth[:]))
	b := func(v bool) uint32 {
		if v {
			return 1
		}
		return 0
	}
	for _, v := range []uint32{b(hasSponsor), b(active), b(escape), sponsor, escapeTo, suite, life, rift} {
		fmt.Fprintf(&sb, "%064x", v)
	}
	return sb.String()
}

func TestAzimuthPointsCall(t *testing.T) {
	for _, c := range []struct {
		ship string
		want string
	}{
		{"~zod", "0x63fa9a87" + strings.Repeat("0", 64)},
		{"~marzod", "0x63fa9a87" + strings.Repeat("0", 60) + "0100"},
		{"~sampel-palnet", "0x63fa9a87" + strings.Repeat("0", 56) + fmt.Sprintf("%08x", mustShipUint(t, "~sampel-palnet"))},
	} {
		ship, _ := lane.ParseShip(c.ship)
		got, err := AzimuthPointsCall(ship)
		if err != nil || got != c.want {
			t.Errorf("%s: %q, %v; want %q", c.ship, got, err, c.want)
		}
	}
	for _, s := range []string{"~doznec-dozzod-dozzod", "~dasres-ragnep-lislyt-ribpyl--mosnyx-bisdem-nidful-marzod"} {
		ship, err := lane.ParseShip(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := AzimuthPointsCall(ship); err == nil {
			t.Errorf("%s (%s): no error", s, ship.Class())
		}
	}
}

func mustShipUint(t testing.TB, s string) uint32 {
	ship, err := lane.ParseShip(s)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := ship.Uint64()
	return uint32(n)
}

func TestParseAzimuthPoint(t *testing.T) {
	auth := chainWord(t, rfcPub)
	var crypt [32]byte
	crypt[0], crypt[31] = 0xaa, 0x55
	ok := abiWords(crypt, auth, true, true, false, 0x100, 0, 1, 7, 2)
	c, err := ParseAzimuthPoint(ok)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Active || c.Suite != 1 || c.Life != 7 || c.Rift != 2 || c.Auth != auth || c.Crypt != crypt {
		t.Fatalf("parsed %+v", c)
	}
	for name, bad := range map[string]string{
		"short":          ok[:len(ok)-2],
		"no 0x":          "00" + ok[2:],
		"not hex":        ok[:100] + "zz" + ok[102:],
		"bool 2":         abiWords(crypt, auth, true, true, false, 0, 0, 1, 7, 2)[:2+64*3] + fmt.Sprintf("%064x", 2) + ok[2+64*4:],
		"uint32 too big": ok[:2+64*8] + fmt.Sprintf("%064x", uint64(1)<<32) + ok[2+64*9:],
	} {
		if _, err := ParseAzimuthPoint(bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	for name, p := range map[string]string{
		"inactive": abiWords(crypt, auth, true, false, false, 0, 0, 1, 7, 2),
		"life 0":   abiWords(crypt, auth, true, true, false, 0, 0, 1, 0, 0),
		"suite 2":  abiWords(crypt, auth, true, true, false, 0, 0, 2, 7, 2),
		"no auth":  abiWords(crypt, [32]byte{}, true, true, false, 0, 0, 1, 7, 2),
	} {
		c, err := ParseAzimuthPoint(p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := c.Entry(palnet); !errors.Is(err, ErrNoKeys) {
			t.Errorf("%s: Entry error %v, want ErrNoKeys", name, err)
		}
	}
}

// rollerResult is a getPoint result with the fields +point:take:dawn
// (pkg/arvo/lib/vere.hoon) reads, in the roller's shape: numbers as
// decimal strings, keys as 0x hex of the atom.
func rollerResult(life, rift, suite, auth, crypt string) string {
	return `{"dominion":"l2","ownership":{"owner":{"address":"0x0000000000000000000000000000000000000001"}},` +
		`"network":{"rift":"` + rift + `","keys":{"life":"` + life + `","suite":"` + suite +
		`","auth":"0x` + auth + `","crypt":"0x` + crypt + `"},"sponsor":{"has":true,"who":"~marzod"}}}`
}

func TestParseRollerPoint(t *testing.T) {
	auth := chainWord(t, rfcPub)
	crypt := strings.Repeat("0", 62) + "07" // leading zeros kept
	c, err := ParseRollerPoint([]byte(rollerResult("3", "1", "1", hex.EncodeToString(auth[:]), crypt)))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Active || c.Life != 3 || c.Rift != 1 || c.Suite != 1 || c.Auth != auth || c.Crypt[31] != 7 {
		t.Fatalf("parsed %+v", c)
	}
	short, err := ParseRollerPoint([]byte(rollerResult("3", "1", "1", hex.EncodeToString(auth[:]), "7"))) // leading zeros left off
	if err != nil || short.Crypt != c.Crypt {
		t.Fatalf("short key: %x, %v", short.Crypt, err)
	}
	if c, err := ParseRollerPoint([]byte(`{"dominion":"l1","ownership":{}}`)); err != nil || c.Active {
		t.Fatalf("no network: %+v, %v", c, err)
	}
	for name, bad := range map[string]string{
		"life not a number": rollerResult("x", "1", "1", "01", "02"),
		"life too big":      rollerResult("4294967296", "1", "1", "01", "02"),
		"key too long":      rollerResult("1", "1", "1", strings.Repeat("1", 65), "02"),
		"key not hex":       rollerResult("1", "1", "1", "zz", "02"),
		"not json":          "{",
	} {
		if _, err := ParseRollerPoint([]byte(bad)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestChainKeyVerifiesPage: a ship whose authentication key is on chain
// as gen/key.hoon prints it (the RFC 8032 test key's atom, big-endian)
// gets a snapshot line whose key verifies a page made as arvo makes it
// with that key's seed. Read from either source, the line is the same.
func TestChainKeyVerifiesPage(t *testing.T) {
	ship, _ := lane.ParseShip("~sampel-palnet")
	auth := chainWord(t, rfcPub)
	var crypt [32]byte
	crypt[3] = 9
	fromEth, err := ParseAzimuthPoint(abiWords(crypt, auth, true, true, false, 0x100, 0, 1, 2, 1))
	if err != nil {
		t.Fatal(err)
	}
	fromRoller, err := ParseRollerPoint([]byte(rollerResult("2", "1", "1", hex.EncodeToString(auth[:]), hex.EncodeToString(crypt[:]))))
	if err != nil {
		t.Fatal(err)
	}
	e1, err1 := fromEth.Entry(ship)
	e2, err2 := fromRoller.Entry(ship)
	if err1 != nil || err2 != nil || e1 != e2 {
		t.Fatalf("eth %+v %v\nroller %+v %v", e1, err1, e2, err2)
	}
	pub, _ := hex.DecodeString(rfcPub)
	if !bytes.Equal(e1.Pass.SignKey(), pub) {
		t.Fatalf("signing key %x, want %s", e1.Pass.SignKey(), rfcPub)
	}
	snap, err := ParseSnapshot(e1.AppendLine(nil), 0)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := hex.DecodeString(rfcSeed)
	priv := ed25519.NewKeyFromSeed(seed)
	pkt := arvoPage(t, priv, "~sampel-palnet", scry.Name{Ship: ship, Rift: 1, Path: []byte("publ/2/g/x/0/hood//ping")}, []byte("a jammed noun"))
	if got := NewVerifier(snap).VerifyBytes(pkt); got != ReasonVerified {
		t.Fatalf("page: %v, want verified", got)
	}
	// The key read without the reversal is another key: nothing verifies.
	var wrong Entry = e1
	copy(wrong.Pass[1:33], auth[:])
	snap, _ = ParseSnapshot(wrong.AppendLine(nil), 0)
	if got := NewVerifier(snap).VerifyBytes(pkt); got != ReasonBadSignature {
		t.Fatalf("unreversed key: %v, want bad signature", got)
	}
}
