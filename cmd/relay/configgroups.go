package main

// relay run -h and the naming of settings in messages, both made from
// settingTable (settings.go).

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
)

const (
	// usageWidth is the widest line relay run -h prints: an 80-column
	// terminal.
	usageWidth = 80
	// usageColumn is where a flag's words start in relay run -h.
	usageColumn = 30
)

// keyNames lists the keys of group g's object, for a message.
func keyNames(g settingGroup) string {
	var names []string
	for _, s := range settingsOf(g) {
		if s.key != "" {
			_, k, _ := cutKey(s.key)
			names = append(names, k)
		}
	}
	return strings.Join(names, ", ")
}

// refOf names the setting of config key key inside another's message:
// "metrics" (--metrics), or "metrics-http.max-connections" for a setting
// the file alone holds.
func refOf(key string) string {
	s, _ := settingByKey(key)
	if s != nil && s.flag != "" {
		return fmt.Sprintf("%q (--%s)", key, s.flag)
	}
	return strconv.Quote(key)
}

// flagArg returns what s's value looks like in relay run -h: its arg, or
// its type's name as the flag package would print it.
func flagArg(s *setting, v flag.Value) string {
	if s.arg != "" {
		return s.arg
	}
	if g, ok := v.(flag.Getter); ok {
		switch g.Get().(type) {
		case bool:
			return ""
		case int, int64:
			return "int"
		}
	}
	name, _ := flag.UnquoteUsage(&flag.Flag{Value: v})
	return name
}

// isRepeatable reports whether v is a table or an array: a flag given once
// per entry, a JSON object or array in the file.
func isRepeatable(v flag.Value) bool {
	switch v.(type) {
	case galaxyLanes, shipLanes, *sponsorFlag, *laneList, *prefixList:
		return true
	}
	return false
}

// runUsage prints the usage of `relay run`: what every deployment sets,
// then the other flags by group, then the settings only the file holds.
func runUsage(w io.Writer) {
	live := liveKeys()
	fmt.Fprint(w, "usage: relay run --ship ~SHIP [--config FILE] [flags]\n\n")
	printWrapped(w, "", fmt.Sprintf("Runs the relay until SIGINT or SIGTERM. SIGHUP reloads the config file and "+
		"applies %s and %s at once, the rest at the next start. Flags override the file, a JSON object "+
		`whose objects are the groups below: {"ship": "~sipsyl", "log": {"level": "debug"}}.`,
		strings.Join(live[:len(live)-1], ", "), live[len(live)-1]))
	var v settingVals
	var fileOnly []string
	for _, g := range settingGroups {
		heading := false
		for _, s := range settingsOf(g) {
			if s.flag == "" {
				fileOnly = append(fileOnly, s.key)
				continue
			}
			if !heading {
				if g.key == "" {
					fmt.Fprintf(w, "\n%s:\n", g.title)
				} else {
					fmt.Fprintf(w, "\n%s (file: %q):\n", g.title, g.key)
				}
				heading = true
			}
			printFlag(w, s, s.bind(&v))
		}
	}
	fmt.Fprintf(w, "\nIn the file only (docs/operations.md):\n")
	printWrapped(w, "  ", strings.Join(shortenKeys(fileOnly), ", "))
}

// printFlag prints s's line of relay run -h: the flag and its value's
// form, its usage, its default unless a zero, and (repeatable) for a table
// or array.
func printFlag(w io.Writer, s *setting, v flag.Value) {
	head := "  --" + s.flag
	if arg := flagArg(s, v); arg != "" {
		head += " " + arg
	}
	text := s.usage
	switch def := v.String(); {
	case isRepeatable(v):
		text += " (repeatable)"
	case def != "" && def != "0" && def != "false" && s.def == "":
		text += " (default " + def + ")"
	}
	if len(head) >= usageColumn {
		fmt.Fprintln(w, head)
		head = ""
	}
	fmt.Fprintf(w, "%-*s%s\n", usageColumn, head, text)
}

// shortenKeys writes a group's keys that follow one another after the
// first as ".key": pending.ttl, .suppress-window.
func shortenKeys(keys []string) []string {
	out := make([]string, len(keys))
	prev := ""
	for i, k := range keys {
		g, rest, nested := cutKey(k)
		if nested && g == prev {
			out[i] = "." + rest
		} else {
			out[i] = k
		}
		prev = g
	}
	return out
}

// printWrapped prints text's words after indent, wrapped at usageWidth.
func printWrapped(w io.Writer, indent, text string) {
	line := indent
	for _, word := range strings.Fields(text) {
		if len(line) > len(indent) && len(line)+1+len(word) > usageWidth {
			fmt.Fprintln(w, line)
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += word
	}
	fmt.Fprintln(w, line)
}
