package front

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
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

	// HostLanes are lanes on the relay host's own addresses that the
	// ship may reach (a service the operator runs for it there). Any
	// other datagram to the host's addresses (Conn.SetHostAddrs, the
	// relay's listen address, any address the host's kernel routes as
	// local) or to loopback is refused and counted (Stats.SkippedToHost):
	// the ship's namespace reaches the world, not the host.
	HostLanes []netip.AddrPort
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
	c.HostLanes = slices.Clone(c.HostLanes)
	for i, l := range c.HostLanes {
		l = netip.AddrPortFrom(l.Addr().Unmap(), l.Port())
		if !l.Addr().Is4() || l.Port() == 0 {
			return c, fmt.Errorf("front: host lane %v: need an IPv4 address and a port", l)
		}
		c.HostLanes[i] = l
	}
	return c, nil
}

// Files are a prepared device's two files, which Prepare opens in the
// ship's namespace and Open serves: the TUN device (IFF_TUN | IFF_NO_PI | IFF_VNET_HDR,
// non-blocking) and a NETLINK_ROUTE socket in the namespace, for the
// device's counters. Neither needs privilege once open, and both can be
// handed to another process (TUNFileName and NetlinkFileName are the names
// `relay front setup` gives them in LISTEN_FDNAMES or systemd's file
// descriptor store).
type Files struct {
	TUN, Netlink *os.File
}

// Names of Files in LISTEN_FDNAMES (sd_listen_fds(3)) and in systemd's
// file descriptor store (FDNAME=).
const (
	TUNFileName     = "front-tun"
	NetlinkFileName = "front-netlink"
)

// Close closes both files (the TUN is deleted once no process holds it).
func (f *Files) Close() {
	for _, x := range []*os.File{f.TUN, f.Netlink} {
		if x != nil {
			x.Close()
		}
	}
}

// Setup is Prepare and Open in one process: the relay makes the
// namespace and the device itself, and so needs CAP_NET_ADMIN and
// CAP_SYS_ADMIN (root). The unprivileged split is Prepare in a
// privileged step (`relay front setup`) and Open in the relay.
func Setup(cfg Config) (*Conn, error) {
	files, err := Prepare(cfg)
	if err != nil {
		return nil, err
	}
	c, err := Open(cfg, files)
	if err != nil {
		files.Close()
		return nil, err
	}
	return c, nil
}

// Prepare makes the ship's namespace (if absent, and only where the host's
// `ip netns` will see it: see CheckVisible), creates the TUN device in it
// and configures the namespace so that the device is its only route:
// ShipAddr/32 on the device, its MTU and queue length, the device and lo
// up, a default route via the device with ShipAddr as source. It returns
// the device's files; the device lives as long as some process holds its
// TUN file. It needs CAP_NET_ADMIN and CAP_SYS_ADMIN (root). If the device
// exists and is held (by a running relay, or systemd's file descriptor
// store), it makes the namespace's configuration again and returns no
// files and an error wrapping ErrDeviceBusy.
func Prepare(cfg Config) (*Files, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := CheckVisible(cfg.Namespace); err != nil {
		return nil, err
	}
	ns, files, err := createInNetns(cfg)
	if err != nil && !errors.Is(err, ErrDeviceBusy) {
		return nil, err
	}
	defer ns.Close()
	h, cerr := configure(ns, cfg)
	if cerr != nil {
		if files != nil {
			files.Close()
		}
		return nil, cerr
	}
	h.Close()
	return files, err
}

// ErrDeviceBusy reports a TUN device that exists in the namespace and is
// held open by another process: Prepare has nothing to open.
var ErrDeviceBusy = errors.New("device exists and is held by another process (a running relay, or the unit's file descriptor store)")

// Open serves files, which Prepare made for cfg (in this process or
// another): it needs no privilege. The calling thread's network namespace
// is taken as the relay's: its kernel is asked, by route lookups, which
// addresses are the host's own (see Conn.ReadBatch). It takes ownership of files; Conn.Close
// closes them.
func Open(cfg Config, files *Files) (*Conn, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if files == nil || files.TUN == nil || files.Netlink == nil {
		return nil, errors.New("front: open: the device's TUN and netlink files are both needed")
	}
	// The kernel of the relay's namespace, where it sends the ship's
	// datagrams (the calling thread's), says what is the host's own.
	routes, err := newHostRoutes(netns.None())
	if err != nil {
		return nil, err
	}
	dev, err := newFileDevice(files.TUN)
	if err != nil {
		routes.close()
		return nil, fmt.Errorf("front: open %s: %w", cfg.Device, err)
	}
	link, err := newFdLink(files.Netlink, cfg.Device)
	if err != nil {
		routes.close()
		return nil, err
	}
	c := newConn(dev, connConfig{
		name:       cfg.Device,
		ship:       netip.AddrPortFrom(cfg.ShipAddr, cfg.ShipPort),
		mtu:        cfg.MTU,
		readBatch:  cfg.ReadBatch,
		writeBatch: cfg.WriteBatch,
		declared:   cfg.HostLanes,
	})
	c.link, c.routes = link, routes
	return c, nil
}

// createInNetns opens (or creates) the namespace and creates the TUN
// device and the netlink socket inside it. It returns a handle on the
// namespace, for the caller to close, and the files, or none and an error
// wrapping ErrDeviceBusy if the device is held elsewhere.
func createInNetns(cfg Config) (netns.NsHandle, *Files, error) {
	var files *Files
	ns := netns.None()
	err := inNetns(cfg.Namespace, true, func(h netns.NsHandle) error {
		// The handle inNetns passes is closed when fn returns; keep a
		// duplicate for configure.
		fd, err := unix.FcntlInt(uintptr(h), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return opErr(cfg.Namespace, "dup namespace handle", err)
		}
		ns = netns.NsHandle(fd)
		tunFile, err := openTUN(cfg.Device)
		if errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("front: netns %s: create tun %s: %w", cfg.Namespace, cfg.Device, ErrDeviceBusy)
		}
		if err != nil {
			return opErr(cfg.Namespace, "create tun "+cfg.Device, err)
		}
		sock, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
		if err != nil {
			tunFile.Close()
			return opErr(cfg.Namespace, "netlink socket", err)
		}
		files = &Files{TUN: tunFile, Netlink: os.NewFile(uintptr(sock), NetlinkFileName)}
		return nil
	})
	if err != nil && !errors.Is(err, ErrDeviceBusy) && ns != netns.None() {
		ns.Close()
		ns = netns.None()
	}
	return ns, files, err
}

// openTUN opens /dev/net/tun and attaches it to device name in the calling
// thread's namespace (creating the device), non-blocking.
func openTUN(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	// IFF_VNET_HDR: the relay may write UDP GSO super-packets
	// (fileDevice.Write), and offers the ship's kernel checksum offload
	// (newFileDevice), never segmentation offload: it reads whole packets.
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, err
	}
	setOffload(uintptr(fd))
	return os.NewFile(uintptr(fd), TUNFileName), nil
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
		{"set mtu of " + cfg.Device, func() error { return h.LinkSetMTU(link, cfg.MTU) }},
		{"add address " + cfg.ShipAddr.String() + "/32 to " + cfg.Device, func() error {
			return h.AddrReplace(link, &netlink.Addr{IPNet: &host})
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
