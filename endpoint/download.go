package endpoint

import (
	"net/netip"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/scry"
)

// Fragmented values, retry limits and held peeks in the Core.
//
// A publisher with Config.FragmentSize serves a longer value one fragment
// a page (name.Frag), each page stating the value's total. A requester's
// Peek is a download: it asks for fragment 0, learns the value's size
// from its page, then keeps Config.Window requests for the other
// fragments in flight, each retried on its own, and answers its waiters
// with the whole value once every fragment is in.

// Limit bounds a request's retries: it gives up when a retry falls due
// after Tries sends (0: no bound on sends) or after Until (0: none).
type Limit struct {
	Tries int
	Until time.Duration
}

func (l Limit) over(tries int, now time.Duration) bool {
	return (l.Tries > 0 && tries >= l.Tries) || (l.Until > 0 && now > l.Until)
}

type dlKey struct {
	rcvr lane.Ship
	path string
}

// download is a Peek in flight: the value's fragments as they come.
type download struct {
	key      dlKey
	lim      Limit
	frags    [][]byte // nil until fragment 0's page says how many
	total    uint64
	got      int    // fragments in
	next     uint64 // the next fragment to ask for
	inflight int
	tries    int // the most sends a fragment took
	waiters  []func(Response)
}

// Fetch starts (or joins) a download of the value at path on rcvr that
// gives up at lim; done is called, from a later Handle or Tick, with the
// whole value or, past lim, with ErrGaveUp (or ErrBadValue, or
// ErrTooManyRequests if MaxPending left it no request in flight). A joined
// download keeps the Limit it started with. It appends the first sends.
func (c *Core) Fetch(rcvr lane.Ship, path string, lim Limit, now time.Duration, done func(Response), out []Datagram) ([]Datagram, error) {
	k := dlKey{rcvr, path}
	if dl := c.downloads[k]; dl != nil {
		dl.waiters = append(dl.waiters, done)
		return out, nil
	}
	dl := &download{key: k, lim: lim, waiters: []func(Response){done}}
	out, err := c.requestFragment(dl, 0, now, out)
	if err != nil {
		return out, err
	}
	c.downloads[k] = dl
	return out, nil
}

func (c *Core) requestFragment(dl *download, frag uint64, now time.Duration, out []Datagram) ([]Datagram, error) {
	pkt := scry.NewPeek(scry.Name{Ship: dl.key.rcvr, Bloq: scry.DefaultBloq, Frag: frag, Path: []byte(dl.key.path)})
	out, err := c.start(dl.key.rcvr, dl.key.path, &pkt, dl.lim, dl, now, nil, out)
	if err == nil {
		dl.inflight++
	}
	return out, err
}

// fragment takes the page p answering req, a fragment of its download,
// asks for more up to the window, and completes the download when every
// fragment is in. resp describes p.
func (c *Core) fragment(req *request, p *scry.Packet, resp Response, now time.Duration, out []Datagram) []Datagram {
	dl := req.dl
	if c.downloads[dl.key] != dl {
		return out // cancelled
	}
	dl.inflight--
	dl.tries = max(dl.tries, req.tries)
	if dl.frags == nil {
		n := uint64(1)
		size := uint64(len(p.Data.Frag))
		if p.Data.Total > size {
			if size == 0 || (p.Data.Total+size-1)/size > MaxFragments {
				return c.finish(dl, Response{Err: ErrBadValue, Tries: dl.tries}, out)
			}
			n = (p.Data.Total + size - 1) / size
		}
		dl.frags, dl.total, dl.next = make([][]byte, n), p.Data.Total, 1
	}
	if req.frag < uint64(len(dl.frags)) && dl.frags[req.frag] == nil {
		dl.frags[req.frag] = append([]byte(nil), p.Data.Frag...)
		dl.got++
	}
	if dl.got == len(dl.frags) {
		data := make([]byte, 0, dl.total)
		for _, f := range dl.frags {
			data = append(data, f...)
		}
		resp.Data, resp.Tries = data, dl.tries
		return c.finish(dl, resp, out)
	}
	for dl.inflight < c.cfg.Window && dl.next < uint64(len(dl.frags)) {
		var err error
		if out, err = c.requestFragment(dl, dl.next, now, out); err != nil {
			if dl.inflight == 0 {
				// MaxPending, and no fragment of ours in flight whose
				// page would ask again.
				return c.finish(dl, Response{Err: err, Tries: dl.tries}, out)
			}
			break // a later fragment's page asks again
		}
		dl.next++
	}
	return out
}

// finish ends dl, cancelling its fragments still in flight, and answers
// its waiters with resp.
func (c *Core) finish(dl *download, resp Response, out []Datagram) []Datagram {
	delete(c.downloads, dl.key)
	for k, r := range c.pending {
		if r.dl == dl {
			delete(c.pending, k)
		}
	}
	for _, w := range dl.waiters {
		w(resp)
	}
	return out
}

// giveUp drops r, past its Limit: its waiters (or its download's) get
// ErrGaveUp.
func (c *Core) giveUp(r *request, now time.Duration, out []Datagram) []Datagram {
	if c.legacy[r.key] == r {
		delete(c.legacy, r.key)
	} else {
		delete(c.pending, r.key)
	}
	resp := Response{Err: ErrGaveUp, Tries: r.tries}
	if r.dl != nil {
		if c.downloads[r.dl.key] == r.dl {
			resp.Tries = max(r.dl.tries, r.tries)
			return c.finish(r.dl, resp, out)
		}
		return out
	}
	for _, w := range r.waiters {
		w(resp)
	}
	return out
}

// replyFragment answers peek p for value v: the fragment it names when v
// is longer than Config.FragmentSize (nothing for one past the end), else
// the whole value.
func (c *Core) replyFragment(p *scry.Packet, v []byte, from netip.AddrPort, now time.Duration, out []Datagram) []Datagram {
	fs := uint64(c.cfg.FragmentSize)
	if fs == 0 || uint64(len(v)) <= fs {
		return c.answer(c.reply(p, v), from, now, out)
	}
	lo := p.Name.Frag * fs
	if p.Name.Frag >= (uint64(len(v))+fs-1)/fs {
		return out
	}
	hi := min(lo+fs, uint64(len(v)))
	return c.answer(c.replyPart(p, v[lo:hi], uint64(len(v))), from, now, out)
}

// heldPeek is a peek for a path that has not grown yet.
type heldPeek struct {
	name string // its name bytes
	pkt  []byte // the peek, re-parsed when it is answered
	from netip.AddrPort
}

// Hold makes this publisher hold peeks for path, which it has not
// published yet, until Grow publishes it, and answer them then (after
// its Think time): a publisher waiting for a value to exist. A copy of a
// held peek (the same name from the same lane) is not held twice. Without
// Hold, a peek for an unpublished path is ignored.
func (c *Core) Hold(path string) {
	if _, ok := c.published[path]; ok || scry.IsNotifyPath([]byte(path)) {
		return
	}
	if _, ok := c.holds[path]; !ok {
		c.holds[path] = nil
	}
}

// hold keeps peek p from lane from if its path is held.
func (c *Core) hold(p *scry.Packet, from netip.AddrPort, out []Datagram) []Datagram {
	path := string(p.Name.Path)
	held, ok := c.holds[path]
	if !ok || len(held) >= MaxPending {
		return out
	}
	name := p.NameBytes()
	for _, h := range held {
		if h.from == from && h.name == string(name) {
			return out
		}
	}
	peek := scry.NewPeek(p.Name)
	c.holds[path] = append(held, heldPeek{name: string(name), pkt: peek.Append(nil), from: from})
	return out
}

// answerHeld answers the peeks held for path, now grown to v.
func (c *Core) answerHeld(path string, v []byte, now time.Duration, out []Datagram) []Datagram {
	held, ok := c.holds[path]
	if !ok {
		return out
	}
	delete(c.holds, path)
	for _, h := range held {
		var p scry.Packet
		if p.Parse(h.pkt) == nil {
			out = c.replyFragment(&p, v, h.from, now, out)
		}
	}
	return out
}
