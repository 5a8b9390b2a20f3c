package main

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docDefaults are the defaults the table states in words, where the flag's
// own default is a zero that means them.
var docDefaults = map[string]string{
	"ship":       "(required)",      // no default: relay run refuses to start without it
	"front-port": "the listen port", // 0: the port --listen has
}

// TestFlagsDocumented holds docs/operations.md's table of `relay run`'s
// settings to the flags the code defines: every flag has a row, each row's
// default is the flag's, and the reload column says "live" for exactly the
// settings a SIGHUP applies (liveSettings).
func TestFlagsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	// | `--name` / `key` | default | reload | meaning |, or `--a`, `--b` / ...
	row := regexp.MustCompile("(?m)^\\| (`--[a-z0-9-]+[^`]*`[^|]*)\\| ([^|]*) \\| ([^|]*) \\|")
	flagName := regexp.MustCompile("`--([a-z0-9-]+)")
	type docRow struct{ keys, def, reload string }
	rows := map[string]docRow{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		_, keys, _ := strings.Cut(m[1], " / ")
		for _, n := range flagName.FindAllStringSubmatch(m[1], -1) {
			rows[n[1]] = docRow{keys, strings.Trim(strings.TrimSpace(m[2]), "`"), strings.TrimSpace(m[3])}
		}
	}
	defineRunFlags().fs.VisitAll(func(fl *flag.Flag) {
		r, ok := rows[fl.Name]
		if !ok {
			t.Errorf("--%s has no row in docs/operations.md", fl.Name)
			return
		}
		if key := configKeyOf(fl.Name); key != "" && !strings.Contains(r.keys, "`"+key+"`") {
			t.Errorf("--%s: docs/operations.md's row gives config key %q, want `%s`", fl.Name, strings.TrimSpace(r.keys), key)
		}
		want := fl.DefValue
		if w, ok := docDefaults[fl.Name]; ok {
			want = w
		}
		if r.def != want && !(r.def == "none" && (want == "" || want == "[]")) {
			t.Errorf("--%s: docs/operations.md says default %q, the flag's is %q", fl.Name, r.def, want)
		}
		if live := slices.Contains(liveSettings, fl.Name); live != strings.Contains(r.reload, "live") {
			t.Errorf("--%s: docs/operations.md says reload %q; live %v", fl.Name, r.reload, live)
		}
	})
}

// TestFileKeysDocumented: every group of settingGroups has a row in
// docs/operations.md's table of the file's objects listing exactly its
// keys; every repeatable flag's table or array (fileKeys) is in the table
// of JSON values under its nested key, and README names it.
func TestFileKeysDocumented(t *testing.T) {
	ops, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range settingGroups {
		object := "(top level)"
		if g.key != "" {
			object = "`" + g.key + "`"
		}
		var keys []string
		for _, k := range g.keys {
			if k.key != "" {
				keys = append(keys, "`"+k.key+"`")
			}
		}
		if want := "| " + object + " | " + g.title + " | " + strings.Join(keys, ", ") + " |"; !strings.Contains(string(ops), want) {
			t.Errorf("docs/operations.md's table of the config file's objects lacks the row\n  %s", want)
		}
	}
	for key, name := range fileKeys {
		if !strings.Contains(string(ops), "| `"+configKeyOf(name)+"` | `--"+name) {
			t.Errorf("docs/operations.md's config-file table has no row for %q (--%s)", configKeyOf(name), name)
		}
		if !strings.Contains(strings.Join(strings.Fields(string(readme)), " "), "`"+key+"`") {
			t.Errorf("README.md does not name the config-file key %q", key)
		}
	}
}
