package main

// The layout of relay run's settings: the topics relay run -h groups its
// flags under, and the config file's objects, one per topic. A setting's
// key in the file is its group's object and its key there, written
// "group.key" in messages ("pending.max-entries"); the settings every
// deployment sets are at the top level. The flat keys of before (a flag's
// name, or for the repeatable flags the tables in fileKeys) are still
// read, each with a deprecation note.

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// settingGroup is one topic of relay run's settings.
type settingGroup struct {
	title string       // heading in relay run -h
	key   string       // the config file's object, "" for the top level
	keys  []settingKey // in the order relay run -h shows them
}

// settingKey is a setting's key in its group and the flag it sets.
type settingKey struct{ key, flag string }

// settingGroups lays out every flag of relay run, each in one group.
var settingGroups = []settingGroup{
	{title: "Every deployment", keys: []settingKey{
		{"ship", "ship"}, {"listen", "listen"}, {"ship-lane", "ship-lane"}, {"front-netns", "front-netns"},
		{"", "config"}, {"metrics", "metrics"}, {"pki", "pki"}}},
	{title: "Lanes & DNS", key: "network", keys: []settingKey{
		{"galaxies", "galaxy"}, {"lanes", "lane"}, {"relays", "relay"}, {"sponsors", "sponsor"},
		{"public-lanes", "public-lane"}, {"hint-nets", "hint-net"},
		{"galaxy-domain", "galaxy-domain"}, {"galaxy-refresh", "galaxy-refresh"}}},
	{title: "Pending table", key: "pending", keys: []settingKey{
		{"max-entries", "max-pending"}, {"max-entries-per-source", "max-pending-per-source"},
		{"max-requesters", "max-requesters"}, {"max-requesters-per-source", "max-requesters-per-source"},
		{"max-overflow-per-source", "max-overflow-per-source"}, {"ttl", "pending-ttl"},
		{"suppress-window", "suppress-window"}, {"refuse-when-full", "refuse-when-full"}}},
	{title: "Routes", key: "routes", keys: []settingKey{
		{"max-routes", "max-routes"}, {"direct-lane-expiry", "direct-lane-expiry"}}},
	{title: "Amplification", key: "amplification", keys: []settingKey{
		{"rate", "amp-rate"}, {"burst", "amp-burst"}, {"net-rate", "amp-net-rate"}, {"net-burst", "amp-net-burst"},
		{"probes", "amp-probes"}, {"factor", "amp-factor"}, {"net-factor", "amp-net-factor"}}},
	{title: "Sockets & I/O", key: "io", keys: []settingKey{
		{"sockets", "sockets"}, {"batch", "batch"}, {"gso", "gso"}}},
	{title: "Logging", key: "log", keys: []settingKey{
		{"level", "log-level"}, {"format", "log-format"}}},
	{title: "Capture", key: "pcap", keys: []settingKey{
		{"file", "capture"}, {"max-bytes", "capture-max-bytes"}, {"files", "capture-files"}}},
	{title: "Metrics HTTP", key: "metrics-http", keys: []settingKey{
		{"max-connections", "metrics-max-connections"}, {"max-scrapes", "metrics-max-scrapes"}, {"pprof", "pprof"}}},
	{title: "Fronting details", key: "fronting", keys: []settingKey{
		{"device", "front-device"}, {"addr", "front-addr"}, {"port", "front-port"}, {"host-lanes", "front-host-lane"}}},
}

// groupOf returns the group whose config object is key.
func groupOf(key string) (settingGroup, bool) {
	for _, g := range settingGroups {
		if g.key == key {
			return g, true
		}
	}
	return settingGroup{}, false
}

// flagOf returns the flag a key of g sets.
func (g settingGroup) flagOf(key string) (string, bool) {
	for _, k := range g.keys {
		if k.key == key && key != "" {
			return k.flag, true
		}
	}
	return "", false
}

// keyNames lists g's keys, for a message.
func (g settingGroup) keyNames() string {
	var names []string
	for _, k := range g.keys {
		names = append(names, k.key)
	}
	return strings.Join(names, ", ")
}

// keyPath returns the config key of a group's key as messages write it:
// "pending.max-entries", or "ship" at the top level.
func keyPath(group, key string) string {
	if group == "" {
		return key
	}
	return group + "." + key
}

// configKeyOf returns the config key of flag name, as keyPath writes it;
// "" for --config, which has none.
func configKeyOf(name string) string {
	for _, g := range settingGroups {
		for _, k := range g.keys {
			if k.flag == name && k.key != "" {
				return keyPath(g.key, k.key)
			}
		}
	}
	return ""
}

// nestedForm writes the nested form of flag name's setting for a
// deprecation note: "pending": {"max-entries": ...}.
func nestedForm(name string) string {
	group, key, ok := strings.Cut(configKeyOf(name), ".")
	if !ok {
		return fmt.Sprintf("%q", group)
	}
	return fmt.Sprintf("%q: {%q: ...}", group, key)
}

// deprecationNote is what a flat key of flag name in the file says.
func deprecationNote(flat, name string) string {
	return fmt.Sprintf("config: %q is deprecated (flat keys are read for now); write %s", flat, nestedForm(name))
}

// printGroupedUsage prints fs's flags under settingGroups' headings, in
// the groups' order, each as flag.PrintDefaults would.
func printGroupedUsage(w io.Writer, fs *flag.FlagSet) {
	for _, g := range settingGroups {
		if g.key == "" {
			fmt.Fprintf(w, "%s:\n", g.title)
		} else {
			fmt.Fprintf(w, "\n%s (config file: %q):\n", g.title, g.key)
		}
		for _, k := range g.keys {
			printFlag(w, fs.Lookup(k.flag))
		}
	}
}

// printFlag prints one flag as flag.PrintDefaults does.
func printFlag(w io.Writer, fl *flag.Flag) {
	var b strings.Builder
	fmt.Fprintf(&b, "  -%s", fl.Name)
	name, usage := flag.UnquoteUsage(fl)
	if name != "" {
		b.WriteString(" " + name)
	}
	b.WriteString("\n    \t")
	b.WriteString(strings.ReplaceAll(usage, "\n", "\n    \t"))
	switch fl.DefValue {
	case "", "0", "false", "[]":
	default:
		if g, ok := fl.Value.(flag.Getter); ok {
			if _, isString := g.Get().(string); isString {
				fmt.Fprintf(&b, " (default %q)", fl.DefValue)
				break
			}
		}
		fmt.Fprintf(&b, " (default %v)", fl.DefValue)
	}
	fmt.Fprintln(w, b.String())
}
