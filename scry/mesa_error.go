package scry

// MesaError is why a datagram is not an acceptable mesa packet, or why an
// in-place edit could not be made. The values are comparable sentinels;
// returning one allocates nothing. Each has a stable metrics label (Reason)
// and, for the parser's verdicts, vere's exact message (VereText).
type MesaError uint8

// Parser verdicts, one per message of vere's mesa_sift_pact_from_buf.
const (
	// ErrMesaUnexpectedEOF: a field runs past the end of the datagram.
	ErrMesaUnexpectedEOF MesaError = iota + 1
	// ErrMesaUnexpectedEnd: a meta byte (or a header bit field) was due with
	// no byte after it; vere's bit reader checks for an empty buffer before
	// each field, so a meta byte that ends the datagram fails this way too.
	ErrMesaUnexpectedEnd
	// ErrMesaBadProtocol: header version is not MesaVersion.
	ErrMesaBadProtocol
	// ErrMesaBadCookie: bytes 4-7 are not MesaCookie (unreachable through
	// Parse, whose gate sends such datagrams to ames as ErrMesaNotMesa).
	ErrMesaBadCookie
	// ErrMesaBadMug: the header mug is not the mug of the parsed body.
	ErrMesaBadMug
	// ErrMesaTrailingBytes: bytes follow the parsed body.
	ErrMesaTrailingBytes
	// ErrMesaVarWordTooLong: an explicit fragment-length width above 4.
	ErrMesaVarWordTooLong
	// ErrMesaHopLong: a page with a LONG next-hop.
	ErrMesaHopLong
	// ErrMesaHopMany: a page with a MANY next-hop.
	ErrMesaHopMany
)

// Receive gate verdicts (vere's _mesa_hear, before parsing).
const (
	// ErrMesaNotMesa: shorter than 8 bytes or no cookie at bytes 4-7; vere
	// hands such datagrams to legacy ames.
	ErrMesaNotMesa MesaError = iota + 20
	// ErrMesaTooLarge: longer than MesaMaxPacket; vere drops it. The
	// next-hop edits also return it rather than grow a packet past that.
	ErrMesaTooLarge
)

// Edit refusals (SetNextHop, ClearNextHop).
const (
	// ErrMesaNotPage: next-hops exist only on pages.
	ErrMesaNotPage MesaError = iota + 40
)

// mesaErrorText holds, per error, the metrics label, vere's message (or a
// description for verdicts vere does not word) and the stage it comes from.
var mesaErrorText = [...]struct{ reason, vere, stage string }{
	ErrMesaUnexpectedEOF:  {"unexpected-eof", "unexpected eof", "parser"},
	ErrMesaUnexpectedEnd:  {"unexpected-end", "unexpected end of packet", "parser"},
	ErrMesaBadProtocol:    {"bad-protocol", "bad protocol", "parser"},
	ErrMesaBadCookie:      {"bad-cookie", "bad cookie", "parser"},
	ErrMesaBadMug:         {"bad-mug", "bad mug", "parser"},
	ErrMesaTrailingBytes:  {"trailing-bytes", "trailing bytes", "parser"},
	ErrMesaVarWordTooLong: {"var-word-too-long", "var_word too long", "parser"},
	ErrMesaHopLong:        {"hop-long", "mesa: sift invalid hop long", "parser"},
	ErrMesaHopMany:        {"hop-many", "mesa: sift invalid hop many", "parser"},
	ErrMesaNotMesa:        {"not-mesa", "not a mesa packet (len < 8 or bytes 4..7 != cookie); vere hands it to the legacy ames path", "gate"},
	ErrMesaTooLarge:       {"too-large", "len > 1472, dropped by _mesa_hear before parsing", "gate"},
	ErrMesaNotPage:        {"not-page", "next-hop edit on a packet that is not a page", "edit"},
}

func (e MesaError) text() (reason, vere, stage string) {
	if int(e) < len(mesaErrorText) && mesaErrorText[e].reason != "" {
		t := mesaErrorText[e]
		return t.reason, t.vere, t.stage
	}
	return "unknown", "unknown mesa error", "unknown"
}

// Reason returns a short stable label for metrics and logs, such as
// "bad-mug" or "not-mesa".
func (e MesaError) Reason() string { r, _, _ := e.text(); return r }

// VereText returns vere's message for a parser verdict, exactly as
// mesa_sift_pact_from_buf returns it ("bad mug", "mesa: sift invalid hop
// long", ...); for gate verdicts and edit refusals, a description.
func (e MesaError) VereText() string { _, v, _ := e.text(); return v }

// Stage returns "parser", "gate" or "edit": where the verdict comes from.
func (e MesaError) Stage() string { _, _, s := e.text(); return s }

// VereReason returns the verdict as the test vectors word it: the stage, a
// colon and VereText, e.g. "parser: bad mug".
func (e MesaError) VereReason() string { return e.Stage() + ": " + e.VereText() }

// Error returns "mesa: " and the metrics label, e.g. "mesa: bad-mug".
func (e MesaError) Error() string {
	if int(e) < len(mesaErrorStrings) && mesaErrorStrings[e] != "" {
		return mesaErrorStrings[e]
	}
	return "mesa: unknown"
}

// mesaErrorStrings holds Error's results as constants, so that formatting
// an error allocates nothing.
var mesaErrorStrings = [...]string{
	ErrMesaUnexpectedEOF:  "mesa: unexpected-eof",
	ErrMesaUnexpectedEnd:  "mesa: unexpected-end",
	ErrMesaBadProtocol:    "mesa: bad-protocol",
	ErrMesaBadCookie:      "mesa: bad-cookie",
	ErrMesaBadMug:         "mesa: bad-mug",
	ErrMesaTrailingBytes:  "mesa: trailing-bytes",
	ErrMesaVarWordTooLong: "mesa: var-word-too-long",
	ErrMesaHopLong:        "mesa: hop-long",
	ErrMesaHopMany:        "mesa: hop-many",
	ErrMesaNotMesa:        "mesa: not-mesa",
	ErrMesaTooLarge:       "mesa: too-large",
	ErrMesaNotPage:        "mesa: not-page",
}
