package transport

import (
	"net/netip"
	"testing"
)

func TestListenNetwork(t *testing.T) {
	cases := []struct{ addr, network, address string }{
		{"127.0.0.1:80", "udp4", "127.0.0.1:80"},
		{"[::ffff:10.0.0.1]:80", "udp4", "10.0.0.1:80"},
		{"0.0.0.0:0", "udp4", "0.0.0.0:0"},
		{"[::]:9", "udp", "[::]:9"},
		{"[::1]:9", "udp6", "[::1]:9"},
		{"", "udp", ":0"},
	}
	for _, tc := range cases {
		var ap netip.AddrPort
		if tc.addr != "" {
			ap = netip.MustParseAddrPort(tc.addr)
		}
		if network, address := listenNetwork(ap); network != tc.network || address != tc.address {
			t.Errorf("listenNetwork(%q) = %s %s, want %s %s", tc.addr, network, address, tc.network, tc.address)
		}
	}
}
