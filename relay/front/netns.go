package front

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/tun"
)

// Config says where Setup puts the ship. Zero fields take the defaults of
// constants.go, except ShipPort, which is required.
type Config struct {
	// Namespace is the name of the ship's network namespace, a file under
	// /run/netns as `ip netns` names them. Setup creates it if absent (as
	// `ip netns add` does: unshare(CLONE_NEWNET) on a thread and a bind
	// mount of /proc/self/task/TID/ns/net) and never removes it.
	Namespace string

	// Device is the TUN device's name inside the namespace.
	Device string

	// ShipAddr is the ship's IPv4 address on the device, installed as
	// ShipAddr/32. Default DefaultShipAddr.
	ShipAddr netip.Addr

	// ShipPort is the UDP port vere binds (0.0.0.0:ShipPort) in the
	// namespace. Only datagrams from ShipAddr:ShipPort are relayed.
	ShipPort uint16

	// MTU is the device's MTU, in [MinMTU, MaxMTU]. Default DefaultMTU.
	MTU int

	// ReadBatch and WriteBatch size the Conn's buffers (see
	// DefaultReadBatch and DefaultWriteBatch); each buffer is MTU bytes.
	ReadBatch, WriteBatch int

	// TxQueueLen is the device's transmit queue length. Default
	// DefaultTxQueueLen.
	TxQueueLen int
}

// withDefaults validates c and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.Device == "" {
		c.Device = DefaultDevice
	}
	if !c.ShipAddr.IsValid() {
		c.ShipAddr = DefaultShipAddr
	}
	if c.MTU == 0 {
		c.MTU = DefaultMTU
	}
	if c.ReadBatch == 0 {
		c.ReadBatch = DefaultReadBatch
	}
	if c.WriteBatch == 0 {
		c.WriteBatch = DefaultWriteBatch
	}
	if c.TxQueueLen == 0 {
		c.TxQueueLen = DefaultTxQueueLen
	}
	c.ShipAddr = c.ShipAddr.Unmap()
	switch {
	case c.Namespace != filepath.Base(c.Namespace) || c.Namespace == "." || c.Namespace == "..":
		return c, fmt.Errorf("front: netns %q: not a plain name", c.Namespace)
	case len(c.Device) >= unix.IFNAMSIZ:
		return c, fmt.Errorf("front: device %q: longer than %d bytes", c.Device, unix.IFNAMSIZ-1)
	case !c.ShipAddr.Is4() || c.ShipAddr.IsUnspecified() || c.ShipAddr.IsLoopback() || c.ShipAddr.IsMulticast():
		return c, fmt.Errorf("front: ship address %v: need an IPv4 unicast address", c.ShipAddr)
	case c.ShipPort == 0:
		return c, errors.New("front: ship port: required (the port vere binds)")
	case c.MTU < MinMTU || c.MTU > MaxMTU:
		return c, fmt.Errorf("front: MTU %d outside [%d, %d]", c.MTU, MinMTU, MaxMTU)
	case c.ReadBatch < 0 || c.WriteBatch < 0 || c.TxQueueLen < 0:
		return c, errors.New("front: negative batch or queue length")
	}
	return c, nil
}

// Setup makes the ship's namespace (if absent), creates the TUN device in
// it and configures the namespace so that the device is its only route:
// ShipAddr/32 on the device, the device and lo up, a default route via the
// device with ShipAddr as source. It returns the relay's side of the
// device; Conn.Close deletes the device and leaves the namespace (see the
// package comment). It needs CAP_NET_ADMIN and CAP_SYS_ADMIN (root).
func Setup(cfg Config) (*Conn, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ns, dev, err := createInNetns(cfg)
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	// The Conn first, so that its goroutine drains the device's events
	// while configure makes them (and Close cleans up if it fails).
	c := newConn(dev, connConfig{
		name:       cfg.Device,
		ship:       netip.AddrPortFrom(cfg.ShipAddr, cfg.ShipPort),
		mtu:        cfg.MTU,
		readBatch:  cfg.ReadBatch,
		writeBatch: cfg.WriteBatch,
	})
	h, err := configure(ns, cfg)
	if err != nil {
		c.Close()
		return nil, err
	}
	c.link = &nsLink{h: h, device: cfg.Device}
	return c, nil
}

// nsLink is the TUN device seen over a netlink handle in its namespace.
type nsLink struct {
	mu     sync.Mutex      // a netlink.Handle is not safe for concurrent use
	h      *netlink.Handle // nil once closed
	device string
}

// txDropped returns the device's tx_dropped counter (0 if it cannot).
func (l *nsLink) txDropped() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.h == nil {
		return 0
	}
	link, err := l.h.LinkByName(l.device)
	if err != nil || link.Attrs().Statistics == nil {
		return 0
	}
	return link.Attrs().Statistics.TxDropped
}

func (l *nsLink) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.h != nil {
		l.h.Close()
		l.h = nil
	}
}

// createInNetns opens (or creates) the namespace and creates the TUN
// device inside it. It returns a handle on the namespace, for the caller
// to close.
func createInNetns(cfg Config) (netns.NsHandle, tun.Device, error) {
	var dev tun.Device
	var ns netns.NsHandle
	err := inNetns(cfg.Namespace, true, func(h netns.NsHandle) error {
		d, err := tun.CreateTUN(cfg.Device, cfg.MTU)
		if err != nil {
			return opErr(cfg.Namespace, "create tun "+cfg.Device, err)
		}
		// The handle inNetns passes is closed when fn returns; keep a
		// duplicate for configure.
		fd, err := unix.FcntlInt(uintptr(h), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			d.Close()
			return opErr(cfg.Namespace, "dup namespace handle", err)
		}
		dev, ns = d, netns.NsHandle(fd)
		return nil
	})
	return ns, dev, err
}

// configure addresses the device, sets it and lo up and routes everything
// through it, over a netlink handle in ns, which it returns.
func configure(ns netns.NsHandle, cfg Config) (*netlink.Handle, error) {
	fail := func(what string, err error) error { return opErr(cfg.Namespace, what, err) }
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fail("netlink", err)
	}
	link, err := h.LinkByName(cfg.Device)
	if err != nil {
		h.Close()
		return nil, fail("find "+cfg.Device, err)
	}
	lo, err := h.LinkByName("lo")
	if err != nil {
		h.Close()
		return nil, fail("find lo", err)
	}
	host := net.IPNet{IP: cfg.ShipAddr.AsSlice(), Mask: net.CIDRMask(32, 32)}
	steps := []struct {
		what string
		do   func() error
	}{
		{"set lo up", func() error { return h.LinkSetUp(lo) }},
		{"set txqueuelen of " + cfg.Device, func() error { return h.LinkSetTxQLen(link, cfg.TxQueueLen) }},
		{"add address " + cfg.ShipAddr.String() + "/32 to " + cfg.Device, func() error {
			return h.AddrAdd(link, &netlink.Addr{IPNet: &host})
		}},
		{"set " + cfg.Device + " up", func() error { return h.LinkSetUp(link) }},
		{"add default route via " + cfg.Device, func() error {
			return h.RouteReplace(&netlink.Route{
				LinkIndex: link.Attrs().Index,
				Scope:     netlink.SCOPE_LINK,
				Dst:       &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)},
				Src:       host.IP,
			})
		}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			h.Close()
			return nil, fail(s.what, err)
		}
	}
	return h, nil
}

// inNetns runs fn on an OS thread inside the named namespace, creating the
// namespace first if create is set and it is absent. fn gets a handle on
// the namespace, valid while it runs. The thread returns to its original
// namespace afterwards; if it cannot, it is left locked so that the
// runtime ends it rather than reuse a thread in the wrong namespace.
func inNetns(name string, create bool, fn func(netns.NsHandle) error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- opErr(name, "get current netns", err)
			return
		}
		defer orig.Close()
		target, err := enter(name, create)
		if err != nil {
			// Unchanged unless NewNamed failed half way: restore anyway.
			if netns.Set(orig) == nil {
				runtime.UnlockOSThread()
			}
			errc <- err
			return
		}
		err = fn(target)
		target.Close()
		if rerr := netns.Set(orig); rerr != nil {
			errc <- errors.Join(err, opErr(name, "return to the original netns", rerr))
			return // the thread stays locked and dies with this goroutine
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

// enter moves the calling (locked) thread into the named namespace,
// creating it if create is set and it does not exist, and returns a
// handle on it.
func enter(name string, create bool) (netns.NsHandle, error) {
	ns, err := netns.GetFromName(name)
	if errors.Is(err, os.ErrNotExist) && create {
		ns, err = netns.NewNamed(name) // unshare: leaves the thread inside
		if err != nil {
			return ns, opErr(name, "create netns", err)
		}
		return ns, nil
	}
	if err != nil {
		return ns, opErr(name, "open netns", err)
	}
	if err := netns.Set(ns); err != nil {
		ns.Close()
		return netns.None(), opErr(name, "enter netns", err)
	}
	return ns, nil
}

// opErr is Setup's one-line error: "front: netns NAME: WHAT: CAUSE", with a
// hint when the cause is missing privilege.
func opErr(ns, what string, err error) error {
	hint := ""
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		hint = " (needs CAP_NET_ADMIN and CAP_SYS_ADMIN)"
	}
	return fmt.Errorf("front: netns %s: %s: %w%s", ns, what, err, hint)
}
