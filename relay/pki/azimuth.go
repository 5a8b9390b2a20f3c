package pki

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/urbit-relay/relay/lane"
)

// Reading a ship's networking key from where Urbit keeps it: Azimuth's
// contract on Ethereum (layer 1) and the naive rollup's state as the
// roller serves it (layer 1 and layer 2). These are codecs: they build
// requests and read answers and do no I/O (cmd/relay's "relay pki fetch"
// sends them). docs/operations.md says how an operator uses them.

// AzimuthMainnet is Azimuth's data contract on Ethereum mainnet
// (urbit/urbit pkg/base-dev/lib/azimuth.hoon, +mainnet-contracts).
const AzimuthMainnet = "0x223c067F8CF28ae173EE5CafEa60cA44C335fecB"

// azimuthPointsSelector is the ABI selector of Azimuth's public getter
// points(uint32): the first four bytes of keccak256("points(uint32)")
// (computed with golang.org/x/crypto/sha3's legacy Keccak-256, which gives
// a9059cbb for transfer(address,uint256), ERC-20's well-known selector).
// lib/azimuth.hoon calls the same function ('points(uint32)').
var azimuthPointsSelector = [4]byte{0x63, 0xfa, 0x9a, 0x87}

// azimuthPointsWords is the number of 32-byte words points(uint32)
// returns: the Point struct of urbit/azimuth contracts/Azimuth.sol without
// its dynamic array (a public getter leaves arrays out), in order:
// encryptionKey, authenticationKey, hasSponsor, active, escapeRequested,
// sponsor, escapeRequestedTo, cryptoSuiteVersion, keyRevisionNumber,
// continuityNumber (lib/azimuth.hoon's point:eth-noun, the same order).
const azimuthPointsWords = 10

// cryptoSuiteB is the one crypto suite a pass is built for: +pass-from-eth
// (lib/azimuth.hoon) yields a zero key for any other suite.
const cryptoSuiteB = 1

// ErrNoKeys is returned for a point that has no networking key a page
// could be checked against: life 0 (never keyed), inactive, a suite other
// than 1, or zero keys.
var ErrNoKeys = errors.New("pki: no networking keys")

// ChainPoint is what a snapshot needs of a ship's chain state.
type ChainPoint struct {
	Active bool
	Suite  uint32
	Life   uint32 // keyRevisionNumber
	Rift   uint32 // continuityNumber
	// Crypt and Auth are the keys as the contract holds them: bytes32,
	// that is the big-endian bytes of Hoon's atom.
	Crypt, Auth [32]byte
}

// PassFromChain builds the pass Jael builds from a point's keys: zuse's
// +pass-from-eth, (cat 3 'b' (cat 8 q.aut q.enc)), where q.aut is the
// contract's bytes32 read as a big-endian number (+decode-results in
// lib/ethereum.hoon). A Pass is the atom's bytes low first, so each key's
// bytes are reversed here: Pass.SignKey() is then the ed25519 key
// ames.hoon checks pages with, (end 8 (rsh 3 pass)).
func PassFromChain(crypt, auth *[32]byte) Pass {
	var p Pass
	p[0] = passTag
	for i := 0; i < 32; i++ {
		p[1+i] = auth[31-i]
		p[33+i] = crypt[31-i]
	}
	return p
}

// Entry returns the snapshot line for ship, or ErrNoKeys.
func (c *ChainPoint) Entry(ship lane.Ship) (Entry, error) {
	var zero [32]byte
	if !c.Active || c.Life == 0 || c.Suite != cryptoSuiteB || c.Auth == zero || c.Crypt == zero {
		return Entry{}, fmt.Errorf("%s: %w (active %v, life %d, suite %d)", ship, ErrNoKeys, c.Active, c.Life, c.Suite)
	}
	return Entry{Ship: ship, Life: c.Life, Rift: c.Rift, Pass: PassFromChain(&c.Crypt, &c.Auth)}, nil
}

// azimuthShip returns ship as the uint32 Azimuth indexes points by: only
// galaxies, stars and planets are points; a moon's key is kept by its
// planet and a comet's by its attestation.
func azimuthShip(ship lane.Ship) (uint32, error) {
	switch ship.Class() {
	case lane.Galaxy, lane.Star, lane.Planet:
		n, _ := ship.Uint64()
		return uint32(n), nil
	}
	return 0, fmt.Errorf("pki: %s is a %s, not an Azimuth point", ship, ship.Class())
}

// AzimuthPointsCall returns the eth_call data for Azimuth.points(ship), as
// the "0x"-prefixed hex an Ethereum JSON-RPC call object's "data" takes.
func AzimuthPointsCall(ship lane.Ship) (string, error) {
	n, err := azimuthShip(ship)
	if err != nil {
		return "", err
	}
	var b [4 + 32]byte
	copy(b[:], azimuthPointsSelector[:])
	b[32], b[33], b[34], b[35] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return "0x" + hex.EncodeToString(b[:]), nil
}

// ParseAzimuthPoint reads an eth_call result of points(uint32): "0x" and
// azimuthPointsWords ABI words. Each bool word must be 0 or 1 and each
// uint32 word fit 32 bits, as the ABI encodes them.
func ParseAzimuthPoint(result string) (ChainPoint, error) {
	var c ChainPoint
	h, ok := strings.CutPrefix(result, "0x")
	if !ok || len(h) != 2*32*azimuthPointsWords {
		return c, fmt.Errorf("pki: points(uint32) result: want 0x and %d hex digits, got %d characters", 2*32*azimuthPointsWords, len(result))
	}
	var w [azimuthPointsWords][32]byte
	for i := range w {
		if _, err := hex.Decode(w[i][:], []byte(h[64*i:64*i+64])); err != nil {
			return c, fmt.Errorf("pki: points(uint32) result: %v", err)
		}
	}
	word := func(i int, max uint64) (uint64, error) {
		var v uint64
		for j, b := range w[i] {
			if j < 24 && b != 0 {
				return 0, fmt.Errorf("pki: points(uint32) result: word %d exceeds %d", i, max)
			}
			if j >= 24 {
				v = v<<8 | uint64(b)
			}
		}
		if v > max {
			return 0, fmt.Errorf("pki: points(uint32) result: word %d is %d, exceeds %d", i, v, max)
		}
		return v, nil
	}
	c.Crypt, c.Auth = w[0], w[1]
	for i := 2; i <= 4; i++ { // hasSponsor, active, escapeRequested
		v, err := word(i, 1)
		if err != nil {
			return c, err
		}
		if i == 3 {
			c.Active = v == 1
		}
	}
	var u [5]uint32 // sponsor, escapeRequestedTo, suite, life, rift
	for i := range u {
		v, err := word(5+i, 1<<32-1)
		if err != nil {
			return c, err
		}
		u[i] = uint32(v)
	}
	c.Suite, c.Life, c.Rift = u[2], u[3], u[4]
	return c, nil
}

// RollerPointParams returns the params object of the roller's getPoint
// method for ship: {"ship": "~sampel-palnet"}, as vere's boot (+point:give
// in pkg/arvo/lib/vere.hoon) asks it.
func RollerPointParams(ship lane.Ship) (map[string]string, error) {
	if _, err := azimuthShip(ship); err != nil {
		return nil, err
	}
	return map[string]string{"ship": ship.String()}, nil
}

// rollerPoint is the part of a getPoint result a snapshot reads: the
// fields +point:take:dawn (pkg/arvo/lib/vere.hoon) reads from
// result.network. Numbers come as decimal strings ((su dim:ag)), keys as
// "0x" hex of the atom.
type rollerPoint struct {
	Network *struct {
		Rift flexNum `json:"rift"`
		Keys struct {
			Life  flexNum `json:"life"`
			Suite flexNum `json:"suite"`
			Auth  string  `json:"auth"`
			Crypt string  `json:"crypt"`
		} `json:"keys"`
	} `json:"network"`
}

// flexNum is a decimal number sent as a JSON string (as the roller sends
// it) or a JSON number.
type flexNum string

func (f *flexNum) UnmarshalJSON(b []byte) error {
	var s string
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	} else {
		s = string(b)
	}
	*f = flexNum(s)
	return nil
}

func (f flexNum) uint32(what string) (uint32, error) {
	v, err := strconv.ParseUint(string(f), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("pki: getPoint %s %q: want a whole number below 2^32", what, string(f))
	}
	return uint32(v), nil
}

// rollerKey reads a key as the roller writes it: "0x" and the atom's hex,
// big-endian, at most 64 digits (leading zeros may be left off).
func rollerKey(s, what string) ([32]byte, error) {
	var k [32]byte
	h, ok := strings.CutPrefix(s, "0x")
	if !ok || len(h) == 0 || len(h) > 64 {
		return k, fmt.Errorf("pki: getPoint %s %q: want 0x and up to 64 hex digits", what, s)
	}
	if len(h)%2 == 1 {
		h = "0" + h
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		return k, fmt.Errorf("pki: getPoint %s: %v", what, err)
	}
	copy(k[32-len(b):], b)
	return k, nil
}

// ParseRollerPoint reads the result of the roller's getPoint. A point the
// roller returns has a network object only if it is live; one without is
// inactive (its Entry is ErrNoKeys).
func ParseRollerPoint(result []byte) (ChainPoint, error) {
	var c ChainPoint
	var r rollerPoint
	if err := json.Unmarshal(result, &r); err != nil {
		return c, fmt.Errorf("pki: getPoint result: %v", err)
	}
	if r.Network == nil {
		return c, nil
	}
	n := r.Network
	var err error
	if c.Rift, err = n.Rift.uint32("rift"); err != nil {
		return c, err
	}
	if c.Life, err = n.Keys.Life.uint32("life"); err != nil {
		return c, err
	}
	if c.Suite, err = n.Keys.Suite.uint32("suite"); err != nil {
		return c, err
	}
	if c.Auth, err = rollerKey(n.Keys.Auth, "auth"); err != nil {
		return c, err
	}
	if c.Crypt, err = rollerKey(n.Keys.Crypt, "crypt"); err != nil {
		return c, err
	}
	c.Active = true
	return c, nil
}
