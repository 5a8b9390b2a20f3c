package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// inputTool is a subcommand that reports on each input, given as arguments
// or one per line on stdin: `relay decode` and `relay ship`.
type inputTool struct {
	name    string // "relay decode"
	usage   string // the usage text before the flag defaults
	maxLine int    // longer stdin lines are reported via tooLong and skipped
	// start returns the per-input handlers for one run, writing to out.
	start func(out *bufio.Writer, jsonOut bool) (each func(input string), tooLong func(head string))
}

// run parses the command line and reports on every input. Inputs that are
// not valid are reported in the output and do not change the exit code: it
// is 0, 1 if stdin cannot be read or stdout written, and 2 for a bad command
// line (0 for -h).
func (t inputTool) run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(t.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	jsonOut := fs.Bool("json", false, "print one JSON object per input")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), t.usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	out := bufio.NewWriter(stdout)
	each, tooLong := t.start(out, *jsonOut)
	if fs.NArg() > 0 {
		for _, arg := range fs.Args() {
			each(arg)
		}
	} else if err := eachLine(stdin, t.maxLine, each, tooLong); err != nil {
		out.Flush()
		fmt.Fprintf(stderr, "%s: reading stdin: %v\n", t.name, err)
		return 1
	}
	if err := out.Flush(); err != nil {
		fmt.Fprintf(stderr, "%s: writing output: %v\n", t.name, err)
		return 1
	}
	return 0
}

// eachLine calls each for every non-blank line of r that does not start
// with #, trimmed; a line longer than maxLine is passed to tooLong (its first
// maxLine bytes) and skipped.
func eachLine(r io.Reader, maxLine int, each func(string), tooLong func(string)) error {
	br := bufio.NewReaderSize(r, maxLine)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			tooLong(string(line))
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
		} else if s := strings.TrimSpace(string(line)); s != "" && !strings.HasPrefix(s, "#") {
			each(s)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// writeJSONLine writes v to w as one line of JSON, without HTML escaping.
func writeJSONLine(w io.Writer, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(w, "{\"error\":%q}\n", err.Error())
		return
	}
	w.Write(buf.Bytes())
}
