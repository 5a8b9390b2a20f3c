package main

// Configuration errors in the operator's terms. Every error about one
// setting is a settingError: the setting as the operator gave it (a config
// file key, `config: "pending.ttl"`, or a flag, `--log-level`), the value
// as given, and what is wanted:
//
//	config: "pending.ttl": 30: want a duration string such as "30s"
//	--log-level loud: want debug, info, warn or error
//	--ship: missing value (see relay run -h)
//
// No internal names (package prefixes, struct fields) reach these messages.

import (
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/urbit-relay/relay/lane"
)

// settingError is a rejected setting.
type settingError struct {
	ref   string // `config: "key"` or `--flag`
	value string // as given: the file's JSON text, or the command-line word
	want  string // what is wanted, usually "want ..."
}

func (e *settingError) Error() string {
	if e.value == "" {
		return e.ref + ": " + e.want
	}
	sep := ": " // config: "key": value
	if strings.HasPrefix(e.ref, "--") {
		sep = " " // --flag value
	}
	return e.ref + sep + e.value + ": " + e.want
}

// fileRef is how a config file key is named in errors.
func fileRef(key string) string { return "config: " + strconv.Quote(key) }

// flagRef is how a flag is named in errors.
func flagRef(name string) string { return "--" + name }

// shellWord prints a command-line value as it could be typed: bare when it
// is made of ordinary characters, else quoted.
func shellWord(v string) string {
	if v == "" {
		return `""`
	}
	for _, c := range v {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("~._:/=,@+-[]", c)) {
			return strconv.Quote(v)
		}
	}
	return v
}

// wantError is a flag value's rejection, phrased as what is wanted; the
// caller adds the setting and the value (settingError).
type wantError string

func (e wantError) Error() string { return string(e) }

// wantOf returns what a flag whose Value rejected a value with err wants:
// the phrase of a wantError, or for the flag package's own types the form
// their values take.
func wantOf(v flag.Value, err error) string {
	var we wantError
	if errors.As(err, &we) {
		return string(we)
	}
	if g, ok := v.(flag.Getter); ok {
		switch g.Get().(type) {
		case int, int64:
			return "want a whole number"
		case time.Duration:
			return `want a duration string such as "30s"`
		case bool:
			return "want true or false"
		}
	}
	return "want a valid value: " + err.Error()
}

// shipWant says what a ship setting wants, given lane.ParseShip's error for
// input: the form, and the reason input is not one.
func shipWant(input string, err error) string {
	reason := strings.TrimPrefix(err.Error(), lane.ErrInvalidShip.Error()+" "+strconv.Quote(input)+": ")
	reason = strings.TrimPrefix(reason, "lane: ")
	return "want a ship as @p such as ~sampel-palnet, or its number (" + reason + ")"
}

// parseShipValue parses a ship given in a setting.
func parseShipValue(s string) (lane.Ship, error) {
	sh, err := lane.ParseShip(s)
	if err != nil {
		return lane.Ship{}, wantError(shipWant(s, err))
	}
	return sh, nil
}

// parseLaneValue parses a lane (IP:PORT) given in a setting.
func parseLaneValue(s string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.AddrPort{}, wantError("want a lane as IP:PORT such as 203.0.113.5:13337 (an IP address, not a host name; IPv6 in brackets)")
	}
	if ap.Port() == 0 {
		return netip.AddrPort{}, wantError("want a lane as IP:PORT with a port other than 0")
	}
	return lane.Canon(ap), nil
}

// flagSyntaxError rewrites the flag package's own parse errors (those not
// about a value, which settingValue reports) as the other setting errors
// read.
func flagSyntaxError(err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return &settingError{ref: flagRef(name), want: "unknown flag (see relay run -h)"}
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return &settingError{ref: flagRef(name), want: "missing value (see relay run -h)"}
	}
	return fmt.Errorf("%v (see relay run -h)", err)
}

// settingValue wraps a flag's Value so that a rejected value is reported
// in the operator's terms (wantOf), and command-line values are recorded
// as such.
type settingValue struct {
	flag.Value
	s *setting
	f *runFlags
}

// String is the wrapped value's (nil-safe: the flag package calls String
// on a zero value to tell defaults).
func (v *settingValue) String() string {
	if v == nil || v.Value == nil {
		return ""
	}
	return v.Value.String()
}

// IsBoolFlag keeps a wrapped bool flag usable as --flag with no value.
func (v *settingValue) IsBoolFlag() bool {
	b, ok := v.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

func (v *settingValue) Set(s string) error {
	if err := v.Value.Set(s); err != nil {
		want := wantOf(v.Value, err)
		if v.f.inArgs {
			v.f.argErr = &settingError{ref: flagRef(v.s.flag), value: shellWord(clip(s)), want: want}
		}
		return wantError(want)
	}
	if v.f.inArgs {
		v.f.fromArgs[v.s.name()] = true
	}
	return nil
}

// bad returns a settingError for the setting named name (its config key),
// named as the operator gave it: the command line wins over the file; a
// setting given in neither is named by its flag, or its key if it has
// none, with its default value.
func (f *runFlags) bad(name, want string) error {
	v := f.values[name]
	text := clip(v.String())
	raw, inFile := f.fromFile[name]
	switch {
	case f.fromArgs[name]:
		return &settingError{ref: flagRef(v.s.flag), value: shellWord(text), want: want}
	case inFile:
		return &settingError{ref: fileRef(name), value: raw, want: want}
	case v.s.flag != "":
		return &settingError{ref: flagRef(v.s.flag), value: shellWord(text) + " (the default)", want: want}
	}
	return &settingError{ref: fileRef(name), value: jsonValue(v.Value) + " (the default)", want: want}
}

// jsonValue writes a scalar setting's value as the config file would.
func jsonValue(v flag.Value) string {
	if g, ok := v.(flag.Getter); ok {
		switch g.Get().(type) {
		case int, int64, bool:
			return clip(v.String())
		}
	}
	return clip(strconv.Quote(v.String()))
}
