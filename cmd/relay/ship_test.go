package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestRunShipJSON(t *testing.T) {
	in := strings.Join([]string{
		"~sampel-palnet",
		"",
		"# a comment",
		"  65536  ",
		"zod",
		"~doznec-sampel-palnet",
		"~sampel-palnat",
		"1.624.961.343",
	}, "\n") // no final newline: the last line must still be read
	var stdout, stderr bytes.Buffer
	if code := runShip([]string{"--json"}, strings.NewReader(in), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	type report struct {
		Patp    string   `json:"patp"`
		Number  string   `json:"number"`
		Class   string   `json:"class"`
		Sponsor string   `json:"sponsor"`
		Chain   []string `json:"chain"`
		Input   string   `json:"input"`
		Error   string   `json:"error"`
	}
	want := []report{
		{Patp: "~sampel-palnet", Number: "1624961343", Class: "planet", Sponsor: "~talpur", Chain: []string{"~sampel-palnet", "~talpur", "~pur"}},
		{Patp: "~dapnep-ronmyl", Number: "65536", Class: "planet", Sponsor: "~zod", Chain: []string{"~dapnep-ronmyl", "~zod"}},
		{Patp: "~zod", Number: "0", Class: "galaxy", Sponsor: "~zod", Chain: []string{"~zod"}},
		{Patp: "~doznec-sampel-palnet", Number: "5919928639", Class: "moon", Sponsor: "~sampel-palnet", Chain: []string{"~doznec-sampel-palnet", "~sampel-palnet", "~talpur", "~pur"}},
		{Input: "~sampel-palnat"},
		{Patp: "~sampel-palnet", Number: "1624961343", Class: "planet", Sponsor: "~talpur", Chain: []string{"~sampel-palnet", "~talpur", "~pur"}},
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), stdout.String())
	}
	for i, line := range lines {
		var got report
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("line %d %q: %v", i, line, err)
		}
		if want[i].Input != "" {
			if got.Input != want[i].Input || !strings.Contains(got.Error, "suffix syllable") || got.Patp != "" {
				t.Errorf("line %d = %q, want an error object for %q", i, line, want[i].Input)
			}
			continue
		}
		if got.Patp != want[i].Patp || got.Number != want[i].Number || got.Class != want[i].Class ||
			got.Sponsor != want[i].Sponsor || !slices.Equal(got.Chain, want[i].Chain) || got.Error != "" {
			t.Errorf("line %d = %+v, want %+v", i, got, want[i])
		}
		// Field order is part of the output format.
		if !strings.HasPrefix(line, `{"patp":`) {
			t.Errorf("line %d does not start with patp: %q", i, line)
		}
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr = %q", stderr.String())
	}
}

func TestRunShipArgsText(t *testing.T) {
	var stdout, stderr bytes.Buffer
	stdin := strings.NewReader("~zod\n") // ignored when ships are arguments
	code := runShip([]string{"~marnec", "bogus", "18446744073709551616"}, stdin, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	want := `~marnec  257  star  sponsor ~nec  chain ~marnec ~nec
"bogus"  invalid: lane: invalid ship "bogus": "bogus" is not a six-letter word
~doznec--dozzod-dozzod-dozzod-dozzod  18446744073709551616  comet  sponsor ~zod  chain ~doznec--dozzod-dozzod-dozzod-dozzod ~zod
`
	if stdout.String() != want {
		t.Errorf("stdout =\n%s\nwant\n%s", stdout.String(), want)
	}
}

func TestRunShipBadFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := runShip([]string{"--nope"}, strings.NewReader(""), &stdout, &stderr); code != exitUsage {
		t.Errorf("exit %d, want %d", code, exitUsage)
	}
	if !strings.Contains(stderr.String(), "usage: relay ship") {
		t.Errorf("stderr lacks usage: %q", stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout = %q", stdout.String())
	}
}

func TestRunShipLongLine(t *testing.T) {
	in := strings.Repeat("x", 3*maxShipLine) + "\n~nec\n"
	var stdout, stderr bytes.Buffer
	if code := runShip([]string{"--json"}, strings.NewReader(in), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"error":"line longer`) || !strings.HasPrefix(lines[1], `{"patp":"~nec"`) {
		t.Errorf("stdout = %q", stdout.String())
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestRunShipStdinError(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := runShip(nil, failingReader{}, &stdout, &stderr); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if !strings.Contains(stderr.String(), "disk on fire") {
		t.Errorf("stderr = %q", stderr.String())
	}
}
