package interop

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/urbit-relay/relay/internal/harness/vtool"
	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/scry"
)

const (
	// probeTimeout bounds a liveness peek: vere answers its own page from
	// its scry at once, in well under a millisecond on loopback.
	probeTimeout = 3 * time.Second
	// probeRetry is how often a liveness peek is resent while unanswered,
	// and so how soon a peek notices that the ship has died.
	probeRetry = 200 * time.Millisecond
)

// nec is ~nec, galaxy 1, the fronted ship.
var nec = lane.ShipFromUint64(1)

func loopback(port int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(port))
}

// peek sends, from c to dst, a hop-0 peek for ~nec's page at path (a path no
// other peek uses, so the relay's pending table holds it alone) and waits up
// to timeout for its page, resending every probeRetry, and giving up early
// once ship (when not nil) has exited. It returns the page's data and the
// lane it came from.
func peek(c *net.UDPConn, dst netip.AddrPort, path string, timeout time.Duration, ship *vtool.Proc) ([]byte, netip.AddrPort, error) {
	req := scry.NewPeek(scry.Name{Ship: nec, Bloq: scry.DefaultBloq, Path: []byte(path)})
	wire := req.Append(nil)
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 2048)
	for time.Now().Before(deadline) {
		if ship != nil && !ship.Alive() {
			return nil, netip.AddrPort{}, errors.New("the ship has exited")
		}
		if _, err := c.WriteToUDPAddrPort(wire, dst); err != nil {
			return nil, netip.AddrPort{}, err
		}
		resend := time.Now().Add(probeRetry)
		if resend.After(deadline) {
			resend = deadline
		}
		c.SetReadDeadline(resend)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			if err != nil {
				return nil, netip.AddrPort{}, err
			}
			var p scry.Packet
			if p.Parse(buf[:n]) == nil && p.Header.Type == scry.TypePage && p.Name.Ship == nec && bytes.Equal(p.Name.Path, []byte(path)) {
				return append([]byte(nil), p.Data.Frag...), from, nil
			}
		}
	}
	return nil, netip.AddrPort{}, errors.New("no page within " + timeout.String())
}

// probe fails the test unless a peek for ~nec's page at path, sent to dst,
// is answered with vere's page ("hello") and the ship is alive.
func probe(t *testing.T, ship *vtool.Proc, dst netip.AddrPort, path string) {
	t.Helper()
	c := udpSocket(t)
	data, _, err := peek(c, dst, path, probeTimeout, ship)
	if err != nil || string(data) != "hello" {
		t.Fatalf("peek %s at %v: %q %v; ship %s\n%s", path, dst, data, err, ship.State(), ship.Tail(20))
	}
	if !ship.Alive() {
		t.Fatalf("ship %s", ship.State())
	}
}
