package netnstest

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The test network: every host on one bridged segment, 10.77.0.0/24, and a
// NAT router with natSubnet behind it. Both are private ranges that exist only
// in the test's namespaces.
const (
	natSubnet  = "192.168.77.0/24"
	prefixBits = "/24"

	// relayPort is where the relays listen, endpointPort the endpoints.
	relayPort    = 13337
	endpointPort = 31337

	// The NAT router's source-port ranges before and after the rebinding.
	natPortsBefore = "20000-20099"
	natPortsAfter  = "30000-30099"

	// nftTable is the table the tests add in their namespaces.
	nftTable = "netnstest"
)

// Hosts on the segment, and the NAT router's inside.
var (
	galaxyIP     = netip.MustParseAddr("10.77.0.1")
	starIP       = netip.MustParseAddr("10.77.0.2")
	requesterIP  = netip.MustParseAddr("10.77.0.10")
	requester2IP = netip.MustParseAddr("10.77.0.11")
	publisherIP  = netip.MustParseAddr("10.77.0.20")
	firewalledIP = netip.MustParseAddr("10.77.0.21")
	routerIP     = netip.MustParseAddr("10.77.0.30")
	routerLANIP  = netip.MustParseAddr("192.168.77.1")
	natPubIP     = netip.MustParseAddr("192.168.77.2")
)

// network is one test's set of namespaces.
type network struct {
	t      testing.TB
	prefix string   // namespace name prefix, unique to the test process and test
	ns     []string // created namespaces, in creation order
	sw     string   // the switch namespace, holding bridge br0
}

// host is a namespace on the network.
type host struct {
	ns string
	ip netip.Addr
}

// requireNetns skips (or, with NETNSTEST_REQUIRE, fails) the test unless it
// can create namespaces, veth pairs and nftables rules.
func requireNetns(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		skipOrFail(t, "netns tests need root to create network namespaces (CI runs them as root)")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			skipOrFail(t, "netns tests need %q (iproute2 and nftables; .ci/run installs them): %v", tool, err)
		}
	}
}

// newNetwork creates the switch namespace; hosts are added with addHost.
// Everything is removed at cleanup.
func newNetwork(t testing.TB, tag string) *network {
	t.Helper()
	requireNetns(t)
	n := &network{t: t, prefix: fmt.Sprintf("rly%d%s-", os.Getpid(), tag)}
	t.Cleanup(n.remove)
	n.sw = n.prefix + "sw"
	if out, err := exec.Command("ip", "netns", "add", n.sw).CombinedOutput(); err != nil {
		skipOrFail(t, "cannot create a network namespace (ip netns add): %v: %s", err, bytes.TrimSpace(out))
	}
	n.ns = append(n.ns, n.sw)
	n.ip("-n", n.sw, "link", "set", "lo", "up")
	if out, err := n.try("-n", n.sw, "link", "add", "br0", "type", "bridge"); err != nil {
		skipOrFail(t, "cannot create a bridge in a namespace: %v: %s", err, out)
	}
	n.ip("-n", n.sw, "link", "set", "br0", "up")
	// Probe nftables once: a kernel without nf_tables skips, not fails.
	if out, err := n.nftTry(n.sw, "table inet probe { chain c { type filter hook input priority 0; ct state established accept; }; }\ndelete table inet probe\n"); err != nil {
		skipOrFail(t, "nftables does not work in a network namespace: %v: %s", err, out)
	}
	return n
}

// addHost creates namespace name with one veth into the switch, address ip.
func (n *network) addHost(name string, ip netip.Addr) host {
	n.t.Helper()
	h := host{ns: n.newNS(name), ip: ip}
	port := "p-" + name
	n.ip("-n", n.sw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", h.ns)
	n.ip("-n", n.sw, "link", "set", port, "master", "br0", "up")
	n.ip("-n", h.ns, "addr", "add", ip.String()+prefixBits, "dev", "eth0")
	n.ip("-n", h.ns, "link", "set", "eth0", "up")
	return h
}

// addNATHost creates a router on the segment at routerIP and a host behind
// it at natPubIP, whose traffic the router masquerades with source ports
// from natPortsBefore. It returns the router and the host behind it.
func (n *network) addNATHost(name string) (router, inside host) {
	n.t.Helper()
	router = n.addHost(name+"r", routerIP)
	inside = host{ns: n.newNS(name), ip: natPubIP}
	n.ip("-n", router.ns, "link", "add", "lan0", "type", "veth", "peer", "name", "eth0", "netns", inside.ns)
	n.ip("-n", router.ns, "addr", "add", routerLANIP.String()+prefixBits, "dev", "lan0")
	n.ip("-n", router.ns, "link", "set", "lan0", "up")
	n.ip("-n", inside.ns, "addr", "add", natPubIP.String()+prefixBits, "dev", "eth0")
	n.ip("-n", inside.ns, "link", "set", "eth0", "up")
	n.ip("-n", inside.ns, "route", "add", "default", "via", routerLANIP.String())
	n.run("ip", "netns", "exec", router.ns, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	n.nft(router.ns, natRuleset(natPortsBefore))
	return router, inside
}

// natRuleset masquerades natSubnet's traffic leaving eth0 with source ports
// from ports.
func natRuleset(ports string) string {
	return fmt.Sprintf(`table ip %[1]s {
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		oifname "eth0" ip saddr %[2]s meta l4proto udp masquerade to :%[3]s
	}
}
`, nftTable, natSubnet, ports)
}

// rebindNAT moves the router's masquerade to natPortsAfter and drops its
// existing translations, so the host behind it gets a new public port: the
// rule is replaced, and the router's public address is removed and added
// back, which makes the kernel flush the conntrack entries masqueraded to it
// (nf_nat_masquerade's address notifier), as a NAT box's reboot or binding
// timeout would.
func (n *network) rebindNAT(router host) {
	n.t.Helper()
	n.nft(router.ns, fmt.Sprintf("delete table ip %s\n", nftTable)+natRuleset(natPortsAfter))
	n.ip("-n", router.ns, "addr", "del", router.ip.String()+prefixBits, "dev", "eth0")
	n.ip("-n", router.ns, "addr", "add", router.ip.String()+prefixBits, "dev", "eth0")
}

// firewall makes h drop every UDP datagram that does not belong to a flow
// h started (conntrack established or related), counting the drops.
func (n *network) firewall(h host) {
	n.t.Helper()
	n.nft(h.ns, fmt.Sprintf(`table inet %s {
	chain input {
		type filter hook input priority filter; policy accept;
		iifname "lo" accept
		ct state established,related accept
		meta l4proto udp counter drop
	}
}
`, nftTable))
}

var nftCounter = regexp.MustCompile(`counter packets (\d+) bytes`)

// firewallDrops returns how many datagrams h's firewall dropped.
func (n *network) firewallDrops(h host) int {
	n.t.Helper()
	out := n.run("ip", "netns", "exec", h.ns, "nft", "list", "chain", "inet", nftTable, "input")
	m := nftCounter.FindStringSubmatch(out)
	if m == nil {
		n.t.Fatalf("no counter in %s's firewall:\n%s", h.ns, out)
	}
	v, _ := strconv.Atoi(m[1])
	return v
}

func (n *network) newNS(name string) string {
	n.t.Helper()
	ns := n.prefix + name
	n.run("ip", "netns", "add", ns)
	n.ns = append(n.ns, ns)
	n.ip("-n", ns, "link", "set", "lo", "up")
	return ns
}

// remove kills whatever still runs in the network's namespaces (a leak: the
// tests stop their processes first, and fail if any is left) and deletes
// them.
func (n *network) remove() {
	for i := len(n.ns) - 1; i >= 0; i-- {
		ns := n.ns[i]
		out, _ := exec.Command("ip", "netns", "pids", ns).Output()
		if pids := strings.Fields(string(out)); len(pids) > 0 {
			n.t.Errorf("processes left running in namespace %s: %v; killing them", ns, pids)
			for _, s := range pids {
				if pid, err := strconv.Atoi(s); err == nil {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			n.t.Errorf("ip netns del %s: %v: %s", ns, err, out)
		}
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, n.prefix) {
			n.t.Errorf("namespace left behind: %s", line)
		}
	}
}

// ip runs ip args, failing the test on error.
func (n *network) ip(args ...string) {
	n.t.Helper()
	if out, err := n.try(args...); err != nil {
		n.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func (n *network) try(args ...string) (string, error) {
	out, err := exec.Command("ip", args...).CombinedOutput()
	return string(bytes.TrimSpace(out)), err
}

// run runs a command, failing the test on error, and returns its output.
func (n *network) run(argv ...string) string {
	n.t.Helper()
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		n.t.Fatalf("%s: %v: %s", strings.Join(argv, " "), err, out)
	}
	return string(out)
}

// nft loads ruleset into ns's nftables, failing the test on error.
func (n *network) nft(ns, ruleset string) {
	n.t.Helper()
	if out, err := n.nftTry(ns, ruleset); err != nil {
		n.t.Fatalf("nft in %s: %v: %s\n%s", ns, err, out, ruleset)
	}
}

func (n *network) nftTry(ns, ruleset string) (string, error) {
	cmd := exec.Command("ip", "netns", "exec", ns, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(ruleset)
	out, err := cmd.CombinedOutput()
	return string(bytes.TrimSpace(out)), err
}
