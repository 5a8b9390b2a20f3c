package endpoint

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/scry"
)

// Legacy ames in the Core, as far as a relay sees it. A message is an
// ames-class packet whose content is opaque to the runtime; here its first
// AmesMsgIDLen bytes are its message number and the receiver's ack is an
// ames-class packet back whose content starts with the same number (in
// Arvo both are encrypted; a relay forwards them alike). A fine request
// (wail) asks for one fragment of a scry path and is answered by a purr
// carrying it. Message and Wail retry every RetryInterval until answered
// or past Config.MaxTries; a ship with Config.Legacy answers both kinds.

// Message sends content, an opaque legacy ames message of at least
// AmesMsgIDLen bytes whose first AmesMsgIDLen are its number, to rcvr
// (whose life mod 16 is rcvrLife); done is called with its ack (Data: the
// ack's content) or, past Config.MaxTries, with ErrGaveUp. A message with
// the number of one in flight joins it. Vere drops trailing zero bytes
// when it forwards, so content should not end in one.
func (c *Core) Message(rcvr lane.Ship, rcvrLife uint8, content []byte, now time.Duration, done func(Response), out []Datagram) ([]Datagram, error) {
	if len(content) < AmesMsgIDLen {
		return out, ErrBadValue
	}
	p := scry.NewAmes(c.cfg.Ship, rcvr, c.cfg.Life, rcvrLife, content)
	if c.cfg.Legacy {
		c.sent.add(string(content[:AmesMsgIDLen]))
	}
	return c.startLegacy(rcvr, "", msgKey(rcvr, content), p.Append(nil), now, done, out)
}

// Wail asks rcvr for fragment frag of path over legacy ames (a fine
// request); done is called with the purr's data or, past
// Config.MaxTries, with ErrGaveUp.
func (c *Core) Wail(rcvr lane.Ship, rcvrLife uint8, path string, frag uint32, now time.Duration, done func(Response), out []Datagram) ([]Datagram, error) {
	w := scry.AmesWail{Frag: frag, Path: []byte(path)}
	p := scry.NewAmesFine(c.cfg.Ship, rcvr, c.cfg.Life, rcvrLife, true, w.Append(nil))
	return c.startLegacy(rcvr, path, fineKey(rcvr, []byte(path), frag), p.Append(nil), now, done, out)
}

func (c *Core) startLegacy(rcvr lane.Ship, path, key string, wire []byte, now time.Duration, done func(Response), out []Datagram) ([]Datagram, error) {
	if r, ok := c.legacy[key]; ok {
		r.waiters = append(r.waiters, done)
		return out, nil
	}
	if len(c.legacy) >= MaxPending {
		return out, ErrTooManyRequests
	}
	r := c.newRequest(rcvr, path, wire, Limit{Tries: c.cfg.MaxTries}, key)
	r.waiters = append(r.waiters, done)
	c.legacy[key] = r
	return c.send(r, now, out), nil
}

// msgKey and fineKey key legacy requests: the peer and the message number,
// or the peer, path and fragment.
func msgKey(peer lane.Ship, content []byte) string {
	return string(peer.AppendLE([]byte{'m'}, 16)) + string(content[:AmesMsgIDLen])
}

func fineKey(peer lane.Ship, path []byte, frag uint32) string {
	b := binary.LittleEndian.AppendUint32(peer.AppendLE([]byte{'f'}, 16), frag)
	return string(append(b, path...))
}

// legacyHear takes a legacy packet addressed to this ship: an ack or purr
// completes the request it answers; with Config.Legacy, any other message
// is acked and a wail for a published value answered.
func (c *Core) legacyHear(a *scry.AmesPacket, from netip.AddrPort, now time.Duration, out []Datagram) []Datagram {
	switch a.Class() {
	case scry.AmesClassAmes:
		if len(a.Content) < AmesMsgIDLen {
			return out
		}
		if r, ok := c.legacy[msgKey(a.Sndr, a.Content)]; ok {
			delete(c.legacy, r.key)
			c.complete(r, a.Content, from)
			return out
		}
		if !c.cfg.Legacy || c.sent.has(string(a.Content[:AmesMsgIDLen])) {
			return out
		}
		ack := scry.NewAmes(c.cfg.Ship, a.Sndr, c.cfg.Life, a.SndrTick, c.filler(a.Content[:AmesMsgIDLen], amesAckLen))
		return c.answer(ack.Append(nil), from, now, out)
	case scry.AmesClassPurr:
		var pr scry.AmesPurr
		if pr.Parse(a.Content) != nil {
			return out
		}
		if r, ok := c.legacy[fineKey(a.Sndr, pr.Path, pr.Frag)]; ok {
			delete(c.legacy, r.key)
			c.complete(r, pr.Data, from)
		}
	case scry.AmesClassWail:
		var w scry.AmesWail
		if !c.cfg.Legacy || w.Parse(a.Content) != nil {
			return out
		}
		v, ok := c.published[string(w.Path)]
		if !ok {
			return out
		}
		fs := uint64(scry.AmesPurrDataMax)
		if c.cfg.FragmentSize > 0 {
			fs = min(fs, uint64(c.cfg.FragmentSize))
		}
		n := max(1, (uint64(len(v))+fs-1)/fs)
		if uint64(w.Frag) >= n {
			return out
		}
		lo := uint64(w.Frag) * fs
		pr := scry.AmesPurr{Frag: w.Frag, Path: w.Path, Sig: make([]byte, scry.AmesPurrSigLen), Num: uint32(n), Data: v[lo:min(lo+fs, uint64(len(v)))]}
		purr := scry.NewAmesFine(c.cfg.Ship, a.Sndr, c.cfg.Life, a.SndrTick, false, pr.Append(nil))
		return c.answer(purr.Append(nil), from, now, out)
	}
	return out
}

// complete answers r's waiters with data, heard from lane from.
func (c *Core) complete(r *request, data []byte, from netip.AddrPort) {
	resp := Response{Data: append([]byte(nil), data...), From: from, Tries: r.tries}
	for _, w := range r.waiters {
		w(resp)
	}
}

// legacyPing is a Legacy ship's keepalive to its sponsor: a small message
// numbered 0, which its sponsor's relay learns the lane from as from a
// mesa ping.
func (c *Core) legacyPing(sponsor lane.Ship) []byte {
	p := scry.NewAmes(c.cfg.Ship, sponsor, c.cfg.Life, 1, c.filler(make([]byte, AmesMsgIDLen), amesPingLen))
	return p.Append(nil)
}

// filler returns prefix followed by pseudo-random bytes to n bytes, the
// last never zero (vere's forwarding drops trailing zeros, which no packet
// made by Arvo has).
func (c *Core) filler(prefix []byte, n int) []byte {
	b := make([]byte, n)
	copy(b, prefix)
	for i := len(prefix); i < n; i++ {
		b[i] = byte(c.rng.Uint32())
	}
	if b[n-1] == 0 {
		b[n-1] = 1
	}
	return b
}

// recentIDs is a bounded set of message numbers, the oldest forgotten
// first.
type recentIDs struct {
	set  map[string]struct{}
	ring []string
	next int
}

func (r *recentIDs) add(id string) {
	if _, ok := r.set[id]; ok {
		return
	}
	if r.set == nil {
		r.set = map[string]struct{}{}
	}
	if len(r.ring) < recentIDCap {
		r.ring = append(r.ring, id)
	} else {
		delete(r.set, r.ring[r.next])
		r.ring[r.next] = id
		r.next = (r.next + 1) % recentIDCap
	}
	r.set[id] = struct{}{}
}

func (r *recentIDs) has(id string) bool {
	_, ok := r.set[id]
	return ok
}
