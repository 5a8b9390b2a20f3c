package main

import (
	"bufio"
	"fmt"
	"io"

	"github.com/urbit-relay/relay/lane"
)

// maxShipLine bounds an input line of `relay ship`; longer lines are
// reported as invalid (no ship is anywhere near this long) and skipped.
const maxShipLine = 4096

// shipReport is the --json output for a ship that parsed.
type shipReport struct {
	Patp    string   `json:"patp"`
	Number  string   `json:"number"` // decimal; a ship can exceed 2^53
	Class   string   `json:"class"`
	Sponsor string   `json:"sponsor"`
	Chain   []string `json:"chain"` // the ship, its sponsor, ... up to its galaxy
}

// shipErrorReport is the --json output for an input that is not a ship.
type shipErrorReport struct {
	Input string `json:"input"`
	Error string `json:"error"`
}

// runShip implements `relay ship [--json] [SHIP ...]`: it describes each ship
// (@p or decimal) given as an argument or as a line of stdin.
func runShip(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return inputTool{
		name: "relay ship",
		usage: "usage: relay ship [--json] [SHIP ...]\n\n" +
			"Describes ships (@p such as ~sampel-palnet, or decimal), given as arguments\n" +
			"or one per line on stdin: @p, number, class, sponsor and sponsorship chain.\n\n",
		maxLine: maxShipLine,
		start: func(out *bufio.Writer, jsonOut bool) (func(string), func(string)) {
			p := &shipPrinter{out: out, json: jsonOut}
			return p.describe, func(head string) {
				p.fail(head[:min(len(head), 64)]+"...", fmt.Sprintf("line longer than %d bytes", maxShipLine))
			}
		},
	}.run(args, stdin, stdout, stderr)
}

// shipPrinter writes one description per input. Write errors surface from
// the final Flush of out.
type shipPrinter struct {
	out   *bufio.Writer
	json  bool
	chain []lane.Ship // reused across ships
}

// describe prints one ship, or the reason input is not one.
func (p *shipPrinter) describe(input string) {
	s, err := lane.ParseShip(input)
	if err != nil {
		p.fail(input, err.Error())
		return
	}
	p.chain = s.AppendChain(p.chain[:0])
	if p.json {
		r := shipReport{
			Patp:    s.String(),
			Number:  s.Decimal(),
			Class:   s.Class().String(),
			Sponsor: s.Sponsor().String(),
			Chain:   make([]string, len(p.chain)),
		}
		for i, c := range p.chain {
			r.Chain[i] = c.String()
		}
		writeJSONLine(p.out, r)
		return
	}
	fmt.Fprintf(p.out, "%s  %s  %s  sponsor %s  chain", s, s.Decimal(), s.Class(), s.Sponsor())
	for _, c := range p.chain {
		fmt.Fprintf(p.out, " %s", c)
	}
	p.out.WriteByte('\n')
}

// fail reports an input that is not a ship.
func (p *shipPrinter) fail(input, reason string) {
	if p.json {
		writeJSONLine(p.out, shipErrorReport{Input: input, Error: reason})
		return
	}
	fmt.Fprintf(p.out, "%q  invalid: %s\n", input, reason)
}
