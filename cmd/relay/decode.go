package main

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"

	"github.com/urbit-relay/relay/scry"
)

// maxDecodeLine bounds an input line of `relay decode`: the hex of the
// largest UDP payload (65535 bytes) plus room for a prefix and spaces.
// Longer lines are reported as rejected and skipped.
const maxDecodeLine = 2*65535 + 1024

// decodeInputEcho is how much of an undecodable input a reject line quotes.
const decodeInputEcho = 64

// decodeReport is the --json output for one input. Field names and
// encodings follow testdata/mesa/README.md (mesa) and
// testdata/ames/README.md (ames).
type decodeReport struct {
	Verdict  string `json:"verdict"`          // "accept" or "reject"
	Reason   string `json:"reason,omitempty"` // why rejected
	Protocol string `json:"protocol,omitempty"`
	Input    string `json:"input,omitempty"` // only for input that is not hex
	Len      int    `json:"len,omitempty"`
	Type     string `json:"type,omitempty"`

	// mesa
	Head        *mesaHeadReport `json:"head,omitempty"`
	Name        *mesaNameReport `json:"name,omitempty"`
	PayloadName *mesaNameReport `json:"payload_name,omitempty"`
	Data        *mesaDataReport `json:"data,omitempty"`
	Next        *nextReport     `json:"next,omitempty"`

	// ames
	Sndr    string      `json:"sndr,omitempty"`
	Rcvr    string      `json:"rcvr,omitempty"`
	Relayed *bool       `json:"relayed,omitempty"`
	Origin  *addrReport `json:"origin,omitempty"`
}

type mesaHeadReport struct {
	NextHop uint8  `json:"next_hop"`
	Version uint8  `json:"version"`
	Type    uint8  `json:"type"`
	Hops    uint8  `json:"hops"`
	Mug     string `json:"mug"` // "0x%05x"
}

type mesaNameReport struct {
	Rank    uint8  `json:"rank"`
	Ship    string `json:"ship"` // decimal: ships exceed 2^53
	Rift    uint32 `json:"rift"`
	Bloq    uint8  `json:"bloq"`
	Init    bool   `json:"init"`
	Auth    bool   `json:"auth"`
	Frag    string `json:"frag"` // decimal u64
	PathHex string `json:"path_hex"`
}

type mesaDataReport struct {
	Total string   `json:"total"` // decimal u64
	Auth  string   `json:"auth"`  // "sign", "none", "hmac" or "pair"
	Sig   string   `json:"sig,omitempty"`
	HMAC  string   `json:"hmac,omitempty"`
	Pair  []string `json:"pair,omitempty"`
	Frag  string   `json:"frag"` // hex
}

// addrReport is a lane: an ames origin, or a mesa SHORT next-hop.
type addrReport struct {
	IP   string `json:"ip"`
	Port uint16 `json:"port"`
}

// nextReport is a page's next-hop: {"type":"none"} or
// {"type":"short","ip":...,"port":...}.
type nextReport struct {
	Type string `json:"type"`
	*addrReport
}

// runDecode implements `relay decode [--json] [HEX ...]`: it decodes each
// packet given as a hex argument or as a line of stdin. Hex may have a 0x
// prefix and embedded spaces or colons. Datagrams with the mesa cookie are
// decoded as mesa, all others as legacy ames, with vere's verdicts.
func runDecode(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return inputTool{
		name: "relay decode",
		usage: "usage: relay decode [--json] [HEX ...]\n\n" +
			"Decodes mesa and legacy ames packets, given as hex arguments or one per\n" +
			"line on stdin, and says whether vere would accept each and why not.\n\n",
		maxLine: maxDecodeLine,
		start: func(out *bufio.Writer, jsonOut bool) (func(string), func(string)) {
			d := &decoder{out: out, json: jsonOut}
			return d.decode, func(head string) {
				d.rejectInput(head, fmt.Sprintf("line longer than %d bytes", maxDecodeLine))
			}
		},
	}.run(args, stdin, stdout, stderr)
}

// decoder writes one report per input. Write errors surface from the final
// Flush of out.
type decoder struct {
	out  *bufio.Writer
	json bool
	buf  []byte // decoded packet, reused
	mesa scry.Packet
	ames scry.AmesPacket
}

// decode reports on one hex input.
func (d *decoder) decode(input string) {
	b, err := d.unhex(input)
	if err != nil {
		d.rejectInput(input, err.Error())
		return
	}
	if scry.IsMesa(b) {
		d.decodeMesa(b)
		return
	}
	d.decodeAmes(b)
}

// unhex decodes input into d.buf, ignoring a 0x prefix, whitespace and
// colons.
func (d *decoder) unhex(input string) ([]byte, error) {
	s := strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(input), "0x"), "0X")
	s = strings.Map(func(r rune) rune {
		if r == ':' || unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
	if len(s)%2 != 0 {
		return nil, errors.New("not hex: odd number of digits")
	}
	d.buf = d.buf[:0]
	b, err := hex.AppendDecode(d.buf, []byte(s))
	if err != nil {
		return nil, fmt.Errorf("not hex: %v", err)
	}
	d.buf = b
	return b, nil
}

// rejectInput reports an input that is not a packet at all.
func (d *decoder) rejectInput(input, reason string) {
	if len(input) > decodeInputEcho {
		input = input[:decodeInputEcho] + "..."
	}
	if d.json {
		writeJSONLine(d.out, decodeReport{Verdict: "reject", Reason: reason, Input: input})
		return
	}
	fmt.Fprintf(d.out, "reject  %q: %s\n", input, reason)
}

// decodeMesa reports on a datagram that carries the mesa cookie.
func (d *decoder) decodeMesa(b []byte) {
	p := &d.mesa
	if err := p.Parse(b); err != nil {
		reason := err.Error()
		var me scry.MesaError
		if errors.As(err, &me) {
			reason = me.VereReason()
		}
		if d.json {
			writeJSONLine(d.out, decodeReport{Verdict: "reject", Reason: reason, Protocol: "mesa", Len: len(b)})
			return
		}
		fmt.Fprintf(d.out, "reject  mesa  %d bytes: %s\n", len(b), reason)
		return
	}
	if d.json {
		writeJSONLine(d.out, mesaReport(p, len(b)))
		return
	}
	h := p.Header
	fmt.Fprintf(d.out, "mesa %s  %d bytes  hops %d  mug 0x%05x\n", h.Type, len(b), h.Hops, h.Mug)
	switch h.Type {
	case scry.TypePeek:
		d.printName("name", &p.Name)
	case scry.TypePoke:
		d.printName("name", &p.Name)
		d.printName("payload", &p.PayloadName)
		d.printData(&p.Data)
	case scry.TypePage:
		d.printName("name", &p.Name)
		d.printData(&p.Data)
		if ap, ok := p.NextHopAddr(); ok {
			fmt.Fprintf(d.out, "  next %s\n", ap)
		}
	}
}

// printName prints a mesa name on one line.
func (d *decoder) printName(label string, n *scry.Name) {
	kind := "%data"
	if n.Auth {
		kind = "%auth"
	}
	frag := "init"
	if !n.Init {
		frag = "frag " + strconv.FormatUint(n.Frag, 10)
	}
	fmt.Fprintf(d.out, "  %s %s  rift %d  bloq %d  %s  %s  %s\n",
		label, n.Ship, n.Rift, n.Bloq, kind, frag, printablePath(n.Path))
}

// printData prints a mesa data section on one line.
func (d *decoder) printData(dt *scry.Data) {
	fmt.Fprintf(d.out, "  data total %d  auth %s  fragment %d bytes\n", dt.Total, dt.AuthKind, len(dt.Frag))
}

// printablePath returns "/" and the path, quoted if it is not printable
// ASCII.
func printablePath(p []byte) string {
	for _, c := range p {
		if c < 0x20 || c > 0x7e {
			return strconv.Quote("/" + string(p))
		}
	}
	return "/" + string(p)
}

// mesaReport builds the --json report of an accepted mesa packet.
func mesaReport(p *scry.Packet, n int) decodeReport {
	h := p.Header
	r := decodeReport{
		Verdict:  "accept",
		Protocol: "mesa",
		Len:      n,
		Type:     h.Type.String(),
		Head: &mesaHeadReport{
			NextHop: uint8(h.NextHop),
			Version: h.Version,
			Type:    uint8(h.Type),
			Hops:    h.Hops,
			Mug:     fmt.Sprintf("0x%05x", h.Mug),
		},
	}
	switch h.Type {
	case scry.TypePeek:
		r.Name = nameReport(&p.Name)
	case scry.TypePoke:
		r.Name = nameReport(&p.Name)
		r.PayloadName = nameReport(&p.PayloadName)
		r.Data = dataReport(&p.Data)
	case scry.TypePage:
		r.Name = nameReport(&p.Name)
		r.Data = dataReport(&p.Data)
		r.Next = &nextReport{Type: "none"}
		if ap, ok := p.NextHopAddr(); ok {
			r.Next = &nextReport{Type: "short", addrReport: &addrReport{IP: ap.Addr().String(), Port: ap.Port()}}
		}
	}
	return r
}

func nameReport(n *scry.Name) *mesaNameReport {
	return &mesaNameReport{
		Rank:    n.Rank,
		Ship:    n.Ship.Decimal(),
		Rift:    n.Rift,
		Bloq:    n.Bloq,
		Init:    n.Init,
		Auth:    n.Auth,
		Frag:    strconv.FormatUint(n.Frag, 10),
		PathHex: hex.EncodeToString(n.Path),
	}
}

func dataReport(dt *scry.Data) *mesaDataReport {
	r := &mesaDataReport{
		Total: strconv.FormatUint(dt.Total, 10),
		Auth:  dt.AuthKind.String(),
		Frag:  hex.EncodeToString(dt.Frag),
	}
	switch dt.AuthKind {
	case scry.AuthSign:
		r.Sig = hex.EncodeToString(dt.Auth)
	case scry.AuthHMAC:
		r.HMAC = hex.EncodeToString(dt.Auth)
	case scry.AuthPair:
		a, b := dt.Pair()
		r.Pair = []string{hex.EncodeToString(a), hex.EncodeToString(b)}
	}
	return r
}

// decodeAmes reports on a datagram without the mesa cookie.
func (d *decoder) decodeAmes(b []byte) {
	p := &d.ames
	if err := p.Parse(b); err != nil {
		if d.json {
			writeJSONLine(d.out, decodeReport{Verdict: "reject", Reason: err.Error(), Protocol: "ames", Len: len(b)})
			return
		}
		fmt.Fprintf(d.out, "reject  ames  %d bytes: %s\n", len(b), err)
		return
	}
	class := p.Class().String()
	if d.json {
		relayed := p.Relayed
		r := decodeReport{
			Verdict:  "accept",
			Protocol: "ames",
			Len:      len(b),
			Type:     class,
			Sndr:     p.Sndr.Decimal(),
			Rcvr:     p.Rcvr.Decimal(),
			Relayed:  &relayed,
		}
		if p.Relayed {
			r.Origin = &addrReport{IP: p.Origin.Addr().String(), Port: p.Origin.Port()}
		}
		writeJSONLine(d.out, r)
		return
	}
	fmt.Fprintf(d.out, "ames %s  %d bytes  %s -> %s  ticks %d/%d  content %d bytes",
		class, len(b), p.Sndr, p.Rcvr, p.SndrTick, p.RcvrTick, len(p.Content))
	if p.Relayed {
		fmt.Fprintf(d.out, "  relayed from %s", p.Origin)
	}
	d.out.WriteByte('\n')
}
