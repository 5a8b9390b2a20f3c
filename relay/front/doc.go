// Package front puts a ship "in front of" nothing: the relay owns the
// ship's public UDP port, and the ship behaves exactly as if it stood on
// the public address.
//
// # Mechanism
//
// The ship's runtime, vere, binds 0.0.0.0:PORT and has no bind-address
// option, so it cannot share the relay's address on the host. Instead it
// runs in its own network namespace (`ip netns exec urbit vere ...`) whose
// only interfaces are lo and a TUN device, urbit0, that the relay holds
// open. Prepare builds that namespace: it creates the TUN inside it, puts
// the ship's address (169.254.13.37/32 by default, DefaultShipAddr) on the
// device, sets the device and lo up, and adds a default route via the
// device. Every IPv4/UDP packet the ship sends, to any destination, then
// arrives at the relay through the TUN's file descriptor:
//
//	ship (vere, 169.254.13.37:PORT)            relay
//	  sendto(D, payload) ──IP/UDP──▶ urbit0 ──▶ Conn.ReadBatch → (payload, Addr=D)
//	                                             relay sends payload to D from its public socket
//	  recvfrom → (payload, from R) ◀── urbit0 ◀── Conn.WriteBatch(payload, Addr=R)
//	                                             for a datagram the relay received from R
//
// [Conn] is a transport.Conn: ReadBatch returns each datagram the ship
// sent from its lane, with Addr the DESTINATION the ship addressed;
// WriteBatch writes each datagram for the ship into the TUN as an IPv4/UDP
// packet whose SOURCE is Addr, the true remote lane. The packets are
// encoded and decoded by [ParseUDP4] and [AppendUDP4], a codec with no I/O.
//
// # What the ship sees
//
// A host with one interface and a default route. Its datagrams reach
// whoever it addressed, from the relay's public address and with vere's
// port mapped to the relay's; datagrams for it come from their true remote
// lanes, so vere records the lanes arvo would learn were it on the public
// address itself. It does not see the relay. What it cannot do: send
// anything but UDP from its own port (ICMP, TCP, IPv6, and UDP from other
// sockets such as DNS lookups are counted in Stats and dropped; give vere
// galaxy addresses it need not resolve, or an /etc/netns/NAME/hosts), or
// receive from a loopback lane (the ship's kernel drops such "martian"
// sources; WriteBatch refuses them with transport.ErrInvalidAddr). Nor can
// it reach the relay's host: its datagrams to loopback, to the relay's
// listen address (Conn.SetListenAddrs), to the host's interface addresses
// (Conn.SetHostAddrs) or to any address the host's kernel delivers locally
// (a route lookup in the relay's namespace: an AnyIP or anycast local
// route has no interface address behind it) are refused unless the
// operator declared the lane (Config.HostLanes), so the namespace reaches
// the world, not the host's own services.
//
// The MTU is 65535 (DefaultMTU) so that no datagram vere sends is cut into
// IP fragments inside the namespace; the relay's public socket fragments
// on the real path as vere's own socket would have.
//
// # Lifetime
//
// Prepare creates the namespace if it is absent and never removes it: vere
// runs in it, and a relay restart must find the same namespace. The device
// lives as long as some process holds its TUN file (Files.TUN): the relay
// (Conn.Close closes it), or systemd's file descriptor store, which keeps
// it across a crash and automatic restart of the relay. Once no one holds
// it, the device, its address and the route are gone; vere's sends then
// fail ("network unreachable") until the next Prepare, and vere's socket
// keeps working after it.
//
// # Privileges
//
// Prepare needs CAP_SYS_ADMIN (to create and enter a network namespace and
// bind-mount it under /run/netns) and CAP_NET_ADMIN (to create the TUN and
// configure it), in practice root. Its errors name what failed and say so
// when privilege is the cause. Open needs none: the device's files (Files)
// carry all the relay needs, a TUN file and a NETLINK_ROUTE socket made in
// the namespace (for Drops), so Prepare runs once in a privileged step
// (`relay front setup`) and hands them to a relay that holds no
// capability. Setup is both in one process.
//
// A persistent TUN owned by the relay's user would not do instead: a TUN
// is attached by name in the namespace of the process that opens
// /dev/net/tun, and an unprivileged process cannot enter the ship's
// namespace (setns(2) wants CAP_SYS_ADMIN in the caller's own user
// namespace).
//
// # Where the namespace is seen
//
// A named namespace is a bind mount under /run/netns. Made by a process in
// a mount namespace of its own (one started under `ip netns exec`, or a
// unit with PrivateMounts=), it is invisible to the host, and `ip netns
// exec urbit vere` there fails ("setting the network namespace ... failed:
// Invalid argument"). Prepare refuses to make one there (CheckVisible),
// with a one-line error that says what to run instead; `relay check`
// reports the same.
//
// Linux only.
package front
