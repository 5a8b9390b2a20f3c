package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// updateDocs rewrites the docs' generated settings tables:
// go test -run TestSettingsDocs -update ./cmd/relay/
var updateDocs = flag.Bool("update", false, "rewrite the settings tables of README.md and docs/operations.md from settingTable")

// docRegion is a part of a doc made from settingTable, between
// <!-- settings:NAME:begin --> and <!-- settings:NAME:end -->.
type docRegion struct {
	file, name string
	make       func() string
}

var docRegions = []docRegion{
	{"README.md", "flags", readmeFlagsTable},
	{filepath.Join("docs", "operations.md"), "flags", whyFlagsTable},
	{filepath.Join("docs", "operations.md"), "groups", groupsTable},
	{filepath.Join("docs", "operations.md"), "all", allSettingsTable},
}

// TestSettingsDocs: the settings tables of README.md and
// docs/operations.md are what settingTable makes of them, so a setting
// added, removed, renamed, made live or given a flag changes the docs or
// fails here. With -update it rewrites them.
func TestSettingsDocs(t *testing.T) {
	for _, r := range docRegions {
		path := filepath.Join("..", "..", r.file)
		doc, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		begin, end := "<!-- settings:"+r.name+":begin -->\n", "<!-- settings:"+r.name+":end -->"
		i, j := bytes.Index(doc, []byte(begin)), bytes.Index(doc, []byte(end))
		if i < 0 || j < i || bytes.Count(doc, []byte(begin)) != 1 {
			t.Errorf("%s has no single region %q ... %q", r.file, strings.TrimSpace(begin), end)
			continue
		}
		if r.file == "README.md" {
			if n := fmt.Sprintf("`relay run` has %d flags", flagCount()); !bytes.Contains(doc, []byte(n)) {
				t.Errorf("README.md does not say %q", n)
			}
		}
		want := r.make()
		if got := string(doc[i+len(begin) : j]); got == want {
			continue
		} else if !*updateDocs {
			t.Errorf("%s's %s table is not settingTable's (go test -run TestSettingsDocs -update ./cmd/relay/ rewrites it); first difference at line %d:\n  have %q\n  want %q",
				r.file, r.name, firstDiffLine(got, want)+1, lineOf(got, firstDiffLine(got, want)), lineOf(want, firstDiffLine(got, want)))
			continue
		}
		out := append(append(append([]byte{}, doc[:i+len(begin)]...), want...), doc[j:]...)
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s's %s table", r.file, r.name)
	}
}

// TestSettingsDocsFailsOnDrift: the comparison above fails for a doc that
// lacks a row (a setting added to the table and not to the docs).
func TestSettingsDocsFailsOnDrift(t *testing.T) {
	full := allSettingsTable()
	lines := strings.SplitAfter(full, "\n")
	short := strings.Join(append(append([]string{}, lines[:3]...), lines[4:]...), "")
	if short == full || firstDiffLine(short, full) != 3 {
		t.Errorf("a table without its third row compares equal (line %d)", firstDiffLine(short, full))
	}
}

// firstDiffLine returns the index of the first line where a and b differ.
func firstDiffLine(a, b string) int {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return i
		}
	}
	return min(len(la), len(lb))
}

// lineOf returns line i of s, "" past its end.
func lineOf(s string, i int) string {
	l := strings.Split(s, "\n")
	if i < len(l) {
		return l[i]
	}
	return ""
}

// docFlag writes s's flag as the docs do: `--galaxy ~G=ADDR:PORT`.
func docFlag(s *setting, v flag.Value) string {
	if s.flag == "" {
		return "-"
	}
	if arg := flagArg(s, v); arg != "" && s.arg != "" {
		return "`--" + s.flag + " " + arg + "`"
	}
	return "`--" + s.flag + "`"
}

// docKey writes s's config key as the docs do.
func docKey(s *setting) string {
	if s.key == "" {
		return "(command line only)"
	}
	return "`" + s.key + "`"
}

// docDefault writes s's default as the docs do.
func docDefault(s *setting, v flag.Value) string {
	if s.def != "" {
		return s.def
	}
	switch d := v.String(); d {
	case "", "[]":
		return "none"
	default:
		return "`" + d + "`"
	}
}

// docReload says whether a reload applies s.
func docReload(s *setting) string {
	switch {
	case s.key == "":
		return "-"
	case s.live:
		return "**live**"
	}
	return "restart"
}

// docJSON says how s's value is written in the config file.
func docJSON(v flag.Value) string {
	switch v.(type) {
	case galaxyLanes, shipLanes:
		return "object, ship to lane: `{\"~syl\": \"203.0.113.5:13441\"}`"
	case *sponsorFlag:
		return "object, ship to sponsor: `{\"~ritpub-sipsyl\": \"~sipsyl\"}`"
	case *laneList:
		return "array of lanes: `[\"203.0.113.7:13337\"]`"
	case *prefixList:
		return "array of CIDR prefixes: `[\"10.0.0.0/8\"]`"
	}
	if g, ok := v.(flag.Getter); ok {
		switch g.Get().(type) {
		case int, int64:
			return "number"
		case bool:
			return "`true` or `false`"
		case time.Duration:
			return "duration string: `\"30s\"`"
		}
	}
	return "string"
}

// eachSetting calls fn for every setting, in the docs' order (groups as
// settingGroups, then table order), with a value holding its default.
func eachSetting(fn func(s *setting, v flag.Value)) {
	var vals settingVals
	for _, g := range settingGroups {
		for _, s := range settingsOf(g) {
			fn(s, s.bind(&vals))
		}
	}
}

// flagCount is how many flags relay run has.
func flagCount() int {
	n := 0
	for _, s := range settingTable {
		if s.flag != "" {
			n++
		}
	}
	return n
}

// readmeFlagsTable is README.md's table: the flags, briefly.
func readmeFlagsTable() string {
	var b strings.Builder
	b.WriteString("| flag | config key | default | meaning |\n|---|---|---|---|\n")
	eachSetting(func(s *setting, v flag.Value) {
		if s.flag == "" {
			return
		}
		meaning := s.usage
		if isRepeatable(v) {
			meaning += " (repeatable)"
		}
		if s.live {
			meaning += "; SIGHUP applies it"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", docFlag(s, v), docKey(s), docDefault(s, v), meaning)
	})
	return b.String()
}

// whyFlagsTable is docs/operations.md's table of the flags and why each is
// one.
func whyFlagsTable() string {
	var b strings.Builder
	fmt.Fprintf(&b, "`relay run` has %d flags:\n\n| flag | why it is a flag |\n|---|---|\n", flagCount())
	eachSetting(func(s *setting, v flag.Value) {
		if s.flag != "" {
			fmt.Fprintf(&b, "| %s | %s |\n", docFlag(s, v), s.why)
		}
	})
	return b.String()
}

// groupsTable is docs/operations.md's table of the config file's objects.
func groupsTable() string {
	var b strings.Builder
	b.WriteString("| object | heading | its keys |\n|---|---|---|\n")
	for _, g := range settingGroups {
		object := "(top level)"
		if g.key != "" {
			object = "`" + g.key + "`"
		}
		var keys []string
		for _, s := range settingsOf(g) {
			if s.key != "" {
				_, k, _ := cutKey(s.key)
				keys = append(keys, "`"+k+"`")
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", object, g.title, strings.Join(keys, ", "))
	}
	return b.String()
}

// allSettingsTable is docs/operations.md's table of every setting.
func allSettingsTable() string {
	var b strings.Builder
	b.WriteString("| config key | flag | JSON value | default | reload | meaning |\n|---|---|---|---|---|---|\n")
	eachSetting(func(s *setting, v flag.Value) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", docKey(s), docFlag(s, v), docJSON(v), docDefault(s, v), docReload(s), s.doc)
	})
	return b.String()
}

// TestDocConfigExamples: every JSON block of README.md and
// docs/operations.md that names "ship" is a config file relay run accepts
// (its keys and value forms), so no example keeps a key that is gone.
func TestDocConfigExamples(t *testing.T) {
	block := regexp.MustCompile("(?s)```json\n(.*?)```")
	for _, file := range []string{"README.md", filepath.Join("docs", "operations.md")} {
		doc, err := os.ReadFile(filepath.Join("..", "..", file))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, m := range block.FindAllSubmatch(doc, -1) {
			if !bytes.Contains(m[1], []byte(`"ship":`)) {
				continue // a log line, not a config
			}
			n++
			if err := newRunFlags().applyConfig(m[1]); err != nil {
				t.Errorf("%s: a JSON example is refused: %v\n%s", file, err, m[1])
			}
		}
		if n == 0 {
			t.Errorf("%s has no config example (a json block naming \"ship\")", file)
		}
	}
}
