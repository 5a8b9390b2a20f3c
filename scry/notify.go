package scry

// Scry notifications (docs/protocol.md) travel as ordinary mesa peeks and
// pages whose paths lie in a reserved part of the namespace. This file holds
// their wire forms: the reserved request paths (NotifyPath) and the signed
// payload of the pages that answer them (NotifyMessage). Like the rest of
// the package it does no I/O and Parse never panics; NotifyMessage.Parse
// allocates nothing when the caller reuses its value.
//
// # Request paths
//
// A peek's path (no leading '/', as in every mesa name):
//
//	~notify/1/sub/<subscriber @p>/<subscribed path>
//	~notify/1/hb/<subscriber @p>/<session: 16 lowercase hex digits>/<counter: decimal>
//
// "sub" asks the publisher to answer the subscribed path once it exists and
// is answered by an ack; "hb" is a heartbeat, answered by a heartbeat
// response. The subscriber is written as Urbit prints it (~sampel-palnet),
// the counter without leading zeros; Parse accepts only that one form, so a
// request has exactly one name and relays never split or merge requests by
// spelling.
//
// # Payload
//
// The data fragment of the page answering a reserved peek. Integers are
// little-endian, ships are 16 bytes (u128):
//
//	off  len  field
//	0    1    version: 1
//	1    1    kind: 1 ack (answers "sub"), 2 heartbeat response (answers "hb")
//	2    16   publisher ship
//	18   16   subscriber ship
//	34   8    session id (never 0)
//	42   8    counter: the heartbeat's counter; 0 in an ack
//	50   2    entry count n
//	52        n entries, each:
//	            1    status: 1 pending, 2 value, 3 grown, 4 refused
//	            2    path length (1 to MaxNotifyPath)
//	            *    path
//	            2    value length (0 unless status is value)
//	            *    value
//	end-64    64   Ed25519 signature (Ed25519ctx, context NotifySignContext)
//	               by the publisher over every byte before it
//
// An ack carries exactly one entry, for the subscribed path: pending (no
// value yet; the publisher will notify), value (it exists: here it is),
// grown (it exists but does not fit: fetch it with a plain peek) or refused
// (the publisher keeps no more subscriptions for this subscriber: keep
// polling). A heartbeat response carries zero or more value or grown
// entries, one per subscribed path that has grown since the last response.

import (
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"math"

	"github.com/urbit-relay/relay/lane"
)

const (
	// NotifyPrefix begins every reserved path. "~notify" cannot be a care
	// or vane name of Urbit's namespace (those are single letters and
	// vane names without a sig), and the version segment lets a later
	// protocol take a new prefix without confusing this one.
	NotifyPrefix = "~notify/1/"

	// MaxNotifyPath is the longest path a subscription may name: vere's
	// FINE_PATH_MAX (the longest scry path it accepts in a remote scry
	// request). It keeps an ack, which repeats the path both in its name
	// and in its entry, well inside one packet.
	MaxNotifyPath = 384

	// NotifyVersion is the payload version this code writes and accepts.
	NotifyVersion = 1

	// NotifyHeaderLen is the payload's fixed header, before the entries.
	NotifyHeaderLen = 52

	// NotifySigLen is the length of the trailing signature.
	NotifySigLen = ed25519.SignatureSize

	// NotifyEntryOverhead is an entry's bytes besides its path and value.
	NotifyEntryOverhead = 5

	// NotifySignContext is the Ed25519ctx context string (RFC 8032) of
	// notification signatures, so that they can never be taken for a
	// signature the same key makes for anything else.
	NotifySignContext = "urbit-relay/notify/1"

	// notifyPageOverhead is what a page adds around its payload besides
	// the name: the header and cookie, the data meta byte, a total and a
	// fragment length of two bytes each (a payload under 64 KiB), and
	// room for the next-hop a relay adds on the way.
	notifyPageOverhead = MesaHeaderLen + 1 + 2 + 2 + ShortHopLen

	sessionHexLen = 16
	maxDecimalU64 = 20
)

// NotifyKind is what a reserved request asks for and, equally, the kind of
// the message that answers it.
type NotifyKind uint8

const (
	// NotifyAck: path "sub", answered by an ack.
	NotifyAck NotifyKind = 1
	// NotifyBeat: path "hb", answered by a heartbeat response.
	NotifyBeat NotifyKind = 2
)

// String returns "ack" or "beat".
func (k NotifyKind) String() string {
	switch k {
	case NotifyAck:
		return "ack"
	case NotifyBeat:
		return "beat"
	}
	return "unknown"
}

// NotifyStatus is the state of one subscribed path in a message.
type NotifyStatus uint8

const (
	// NotifyPending: the path has no value yet; the publisher has taken
	// the subscription and will notify. Acks only.
	NotifyPending NotifyStatus = 1
	// NotifyValue: the path has grown; the entry carries its value.
	NotifyValue NotifyStatus = 2
	// NotifyGrown: the path has grown but its value did not fit; fetch it
	// with a peek for the path itself.
	NotifyGrown NotifyStatus = 3
	// NotifyRefused: the publisher holds no more subscriptions for this
	// subscriber; keep polling. Acks only.
	NotifyRefused NotifyStatus = 4
)

// String returns "pending", "value", "grown" or "refused".
func (s NotifyStatus) String() string {
	switch s {
	case NotifyPending:
		return "pending"
	case NotifyValue:
		return "value"
	case NotifyGrown:
		return "grown"
	case NotifyRefused:
		return "refused"
	}
	return "unknown"
}

// Notification decoding errors. They are comparable sentinels; returning
// one does not allocate.
var (
	ErrNotifyPrefix    = errors.New("scry: notify: path outside the reserved prefix")
	ErrNotifyPath      = errors.New("scry: notify: malformed reserved path")
	ErrNotifyShort     = errors.New("scry: notify: payload truncated")
	ErrNotifyVersion   = errors.New("scry: notify: unknown payload version")
	ErrNotifyKind      = errors.New("scry: notify: unknown message kind")
	ErrNotifySession   = errors.New("scry: notify: zero session id")
	ErrNotifyEntry     = errors.New("scry: notify: malformed entry")
	ErrNotifyEntries   = errors.New("scry: notify: entries not allowed for this kind")
	ErrNotifyTrailing  = errors.New("scry: notify: bytes between the entries and the signature")
	ErrNotifyTooLarge  = errors.New("scry: notify: payload exceeds a packet")
	ErrNotifyBadLength = errors.New("scry: notify: path length outside 1..MaxNotifyPath")
)

// IsNotifyPath reports whether path lies in the reserved part of the
// namespace.
func IsNotifyPath(path []byte) bool {
	return len(path) >= len(NotifyPrefix) && string(path[:len(NotifyPrefix)]) == NotifyPrefix
}

// NotifyPath is a reserved request path.
type NotifyPath struct {
	Kind       NotifyKind
	Subscriber lane.Ship
	// Session and Counter are set for NotifyBeat.
	Session uint64
	Counter uint64
	// Path is the subscribed path, for NotifyAck; after Parse a view into
	// the parsed bytes.
	Path []byte
}

// Append appends the path's wire form to dst.
func (p *NotifyPath) Append(dst []byte) []byte {
	dst = append(dst, NotifyPrefix...)
	switch p.Kind {
	case NotifyAck:
		dst = append(dst, "sub/"...)
	default:
		dst = append(dst, "hb/"...)
	}
	dst = p.Subscriber.AppendPatp(dst)
	dst = append(dst, '/')
	if p.Kind == NotifyAck {
		return append(dst, p.Path...)
	}
	const hex = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		dst = append(dst, hex[p.Session>>uint(shift)&0xf])
	}
	dst = append(dst, '/')
	return appendDecimal(dst, p.Counter)
}

// Parse decodes a reserved path, accepting only the form Append writes:
// ErrNotifyPrefix outside the prefix, ErrNotifyPath for anything else that
// is not exactly a "sub" path with a subscribed path of 1 to MaxNotifyPath
// bytes or an "hb" path. p.Path aliases b. It allocates once, the string
// lane.ParseShip reads the @p from.
func (p *NotifyPath) Parse(b []byte) error {
	*p = NotifyPath{}
	if !IsNotifyPath(b) {
		return ErrNotifyPrefix
	}
	rest := b[len(NotifyPrefix):]
	kindSeg, rest, ok := cutSlash(rest)
	if !ok {
		return ErrNotifyPath
	}
	switch string(kindSeg) {
	case "sub":
		p.Kind = NotifyAck
	case "hb":
		p.Kind = NotifyBeat
	default:
		return ErrNotifyPath
	}
	shipSeg, rest, ok := cutSlash(rest)
	if !ok || !parsePatp(shipSeg, &p.Subscriber) {
		*p = NotifyPath{}
		return ErrNotifyPath
	}
	if p.Kind == NotifyAck {
		if len(rest) == 0 || len(rest) > MaxNotifyPath {
			*p = NotifyPath{}
			return ErrNotifyPath
		}
		p.Path = rest
		return nil
	}
	sessSeg, counterSeg, ok := cutSlash(rest)
	if !ok || len(sessSeg) != sessionHexLen {
		*p = NotifyPath{}
		return ErrNotifyPath
	}
	for _, c := range sessSeg {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		default:
			*p = NotifyPath{}
			return ErrNotifyPath
		}
		p.Session = p.Session<<4 | uint64(d)
	}
	n, ok := parseDecimal(counterSeg)
	if !ok {
		*p = NotifyPath{}
		return ErrNotifyPath
	}
	p.Counter = n
	return nil
}

// cutSlash splits b at its first '/'.
func cutSlash(b []byte) (before, after []byte, ok bool) {
	for i, c := range b {
		if c == '/' {
			return b[:i], b[i+1:], true
		}
	}
	return b, nil, false
}

// parsePatp parses seg as a ship printed in @p, accepting only the form
// AppendPatp writes.
func parsePatp(seg []byte, s *lane.Ship) bool {
	if len(seg) < 2 || len(seg) > lane.MaxPatpLen || seg[0] != '~' {
		return false
	}
	v, err := lane.ParseShip(string(seg))
	if err != nil {
		return false
	}
	var buf [lane.MaxPatpLen]byte
	if string(v.AppendPatp(buf[:0])) != string(seg) {
		return false
	}
	*s = v
	return true
}

func appendDecimal(dst []byte, n uint64) []byte {
	var buf [maxDecimalU64]byte
	i := len(buf)
	for {
		i--
		buf[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	return append(dst, buf[i:]...)
}

// parseDecimal parses a u64 written without leading zeros.
func parseDecimal(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > maxDecimalU64 || (len(b) > 1 && b[0] == '0') {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// NotifyEntry is one subscribed path's state in a message.
type NotifyEntry struct {
	Status NotifyStatus
	Path   []byte
	Value  []byte // only for NotifyValue
}

// Size returns the entry's length on the wire.
func (e *NotifyEntry) Size() int { return NotifyEntryOverhead + len(e.Path) + len(e.Value) }

// NotifyEntrySize is the wire length of an entry with a path of pathLen
// bytes and a value of valueLen bytes.
func NotifyEntrySize(pathLen, valueLen int) int { return NotifyEntryOverhead + pathLen + valueLen }

// NotifyRoom returns how many bytes of entries fit in a message carried by
// a page whose name takes nameSize bytes (Name.Size), leaving room for the
// next-hop a relay adds: the page then never exceeds MesaMaxPacket.
func NotifyRoom(nameSize int) int {
	return MesaMaxPacket - notifyPageOverhead - nameSize - NotifyHeaderLen - NotifySigLen
}

// NotifyMessage is the payload of a page answering a reserved peek.
type NotifyMessage struct {
	Kind       NotifyKind
	Publisher  lane.Ship
	Subscriber lane.Ship
	Session    uint64
	Counter    uint64
	// Entries: Parse appends to Entries[:0], so a caller that reuses a
	// NotifyMessage reuses its capacity; entry slices alias the parsed
	// bytes.
	Entries []NotifyEntry
	Sig     [NotifySigLen]byte

	signed []byte // after Parse: the bytes the signature covers
}

// Size returns the payload's length on the wire.
func (m *NotifyMessage) Size() int {
	n := NotifyHeaderLen + NotifySigLen
	for i := range m.Entries {
		n += m.Entries[i].Size()
	}
	return n
}

// appendBody appends everything the signature covers.
func (m *NotifyMessage) appendBody(dst []byte) []byte {
	dst = append(dst, NotifyVersion, byte(m.Kind))
	dst = m.Publisher.AppendLE(dst, lane.MaxShipBytes)
	dst = m.Subscriber.AppendLE(dst, lane.MaxShipBytes)
	dst = binary.LittleEndian.AppendUint64(dst, m.Session)
	dst = binary.LittleEndian.AppendUint64(dst, m.Counter)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(m.Entries)))
	for i := range m.Entries {
		e := &m.Entries[i]
		dst = append(dst, byte(e.Status))
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(e.Path)))
		dst = append(dst, e.Path...)
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(e.Value)))
		dst = append(dst, e.Value...)
	}
	return dst
}

// Append appends the payload with its current Sig to dst. For a message
// Parse accepted it reproduces the input.
func (m *NotifyMessage) Append(dst []byte) []byte {
	dst = m.appendBody(dst)
	return append(dst, m.Sig[:]...)
}

// AppendSigned appends the payload to dst, signed with key, and records the
// signature in m.Sig. Ed25519 signatures are deterministic: the same
// message and key always give the same bytes.
func (m *NotifyMessage) AppendSigned(dst []byte, key ed25519.PrivateKey) []byte {
	start := len(dst)
	dst = m.appendBody(dst)
	sig, err := key.Sign(nil, dst[start:], &ed25519.Options{Context: NotifySignContext})
	if err != nil || len(sig) != NotifySigLen {
		// Unreachable: the context is short and the hash is none.
		return append(dst, m.Sig[:]...)
	}
	copy(m.Sig[:], sig)
	return append(dst, sig...)
}

// Verify reports whether m.Sig is pub's signature of m. After Parse it
// checks the bytes as received; for a message built in memory it encodes
// them first. A public key of the wrong length never verifies.
func (m *NotifyMessage) Verify(pub ed25519.PublicKey) bool {
	if len(pub) != ed25519.PublicKeySize {
		return false
	}
	body := m.signed
	if body == nil {
		body = m.appendBody(nil)
	}
	return ed25519.VerifyWithOptions(pub, body, m.Sig[:], &ed25519.Options{Context: NotifySignContext}) == nil
}

// Parse decodes payload b into m, checking the layout field by field: the
// version, the kind, a nonzero session, every entry (a known status, a
// path of 1 to MaxNotifyPath bytes, a value only with status value), one
// entry in an ack and only value or grown entries in a heartbeat response,
// and that the entries end exactly where the signature begins. It does not
// check the signature (Verify does). On success m's slices alias b; on
// error m is zeroed but keeps the capacity of Entries.
func (m *NotifyMessage) Parse(b []byte) error {
	entries := m.Entries[:0]
	*m = NotifyMessage{Entries: entries}
	err := m.parse(b)
	if err != nil {
		*m = NotifyMessage{Entries: entries[:0]}
	}
	return err
}

func (m *NotifyMessage) parse(b []byte) error {
	if len(b) > MesaMaxPacket {
		return ErrNotifyTooLarge
	}
	if len(b) < NotifyHeaderLen+NotifySigLen {
		return ErrNotifyShort
	}
	if b[0] != NotifyVersion {
		return ErrNotifyVersion
	}
	m.Kind = NotifyKind(b[1])
	if m.Kind != NotifyAck && m.Kind != NotifyBeat {
		return ErrNotifyKind
	}
	m.Publisher = lane.ShipFromBytesLE(b[2:18])
	m.Subscriber = lane.ShipFromBytesLE(b[18:34])
	m.Session = binary.LittleEndian.Uint64(b[34:42])
	if m.Session == 0 {
		return ErrNotifySession
	}
	m.Counter = binary.LittleEndian.Uint64(b[42:50])
	n := int(binary.LittleEndian.Uint16(b[50:52]))
	end := len(b) - NotifySigLen
	body := b[NotifyHeaderLen:end]
	// Every entry takes at least NotifyEntryOverhead+1 bytes, so a count
	// the body cannot hold is rejected before anything is appended.
	if n > len(body)/(NotifyEntryOverhead+1) {
		return ErrNotifyEntry
	}
	if m.Kind == NotifyAck && n != 1 {
		return ErrNotifyEntries
	}
	for i := 0; i < n; i++ {
		if len(body) < 3 {
			return ErrNotifyEntry
		}
		st := NotifyStatus(body[0])
		pl := int(binary.LittleEndian.Uint16(body[1:3]))
		body = body[3:]
		if pl == 0 || pl > MaxNotifyPath {
			return ErrNotifyBadLength
		}
		if len(body) < pl+2 {
			return ErrNotifyEntry
		}
		path := body[:pl]
		vl := int(binary.LittleEndian.Uint16(body[pl : pl+2]))
		body = body[pl+2:]
		if len(body) < vl {
			return ErrNotifyEntry
		}
		value := body[:vl]
		body = body[vl:]
		switch st {
		case NotifyValue:
		case NotifyPending, NotifyRefused:
			if m.Kind != NotifyAck || vl != 0 {
				return ErrNotifyEntry
			}
		case NotifyGrown:
			if vl != 0 {
				return ErrNotifyEntry
			}
		default:
			return ErrNotifyEntry
		}
		if vl == 0 {
			value = nil
		}
		m.Entries = append(m.Entries, NotifyEntry{Status: st, Path: path, Value: value})
	}
	if len(body) != 0 {
		return ErrNotifyTrailing
	}
	copy(m.Sig[:], b[end:])
	m.signed = b[:end]
	return nil
}
