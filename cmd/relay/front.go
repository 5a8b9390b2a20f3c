package main

// Fronting mode's privileged step and its hand-over to the relay.
//
// The relay in fronting mode serves a TUN device in the ship's network
// namespace. Making the namespace and the device needs CAP_SYS_ADMIN and
// CAP_NET_ADMIN; serving the device's file needs nothing. So
// `relay front setup` (front.Prepare) runs once, with privileges, and hands
// the device's two files (front.Files) to the long-running relay, which
// holds no capabilities, in one of two ways:
//
//   - under systemd, as the unit's ExecStartPre=+ step: it stores them in
//     the unit's file descriptor store (FDSTORE=1, sd_pid_notify_with_fds(3)),
//     and systemd passes them to `relay run` (LISTEN_FDS, LISTEN_FDNAMES);
//     they stay in the store across a crash and restart of the relay, and
//     the device with them;
//   - anywhere else, given the relay's command after "--": it drops to
//     --user (no capabilities, bounding set emptied, no_new_privs) and
//     execs it with the files open (frontFDsEnv).
//
// A persistent TUN owned by the relay's user does not do instead: a TUN is
// attached by name in the namespace of the process that opens
// /dev/net/tun, and an unprivileged relay cannot enter the ship's
// namespace (setns needs CAP_SYS_ADMIN).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	relaydaemon "github.com/urbit-relay/relay/relay/daemon"
	"github.com/urbit-relay/relay/relay/front"
)

// frontFDsEnv names the variable `relay front setup -- COMMAND` passes the
// device's files in: "front-tun:FD,front-netlink:FD". frontPIDEnv holds the
// pid they are for (the exec keeps it), so that a child of the relay that
// inherits the variables does not take them for its own.
const (
	frontFDsEnv = "RELAY_FRONT_FDS"
	frontPIDEnv = "RELAY_FRONT_PID"
)

// runFront is `relay front SUBCOMMAND`.
func runFront(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "setup" {
		return runFrontSetup(args[1:], stdout, stderr)
	}
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		frontSetupUsage(stdout)
		return 0
	}
	frontSetupUsage(stderr)
	return exitUsage
}

func frontSetupUsage(w io.Writer) {
	fmt.Fprint(w, `usage: relay front setup [--user USER] [relay run's flags] [-- COMMAND [ARGS...]]

Makes fronting mode's network namespace (--front-netns, if absent), the TUN
device in it and its routes, once, with privileges (root, or CAP_NET_ADMIN
and CAP_SYS_ADMIN), and hands the device to a relay that holds none:

  under systemd (ExecStartPre=+, NOTIFY_SOCKET set): the device is stored in
    the unit's file descriptor store, which systemd passes to relay run
    (docs/deploy/relay-front.service); if the store holds it already, the
    namespace is configured again and nothing else is done;
  with -- COMMAND: drops to --user with no capabilities and execs COMMAND
    (relay run ...) with the device open, e.g.
      relay front setup --config /etc/relay/relay.json --user relay -- \
        relay run --config /etc/relay/relay.json

It refuses, creating nothing, where the namespace would be invisible to the
host's "ip netns" (under "ip netns exec", or any private mount namespace).
Exit 0, or 2 and a one-line error.
`)
}

// runFrontSetup is `relay front setup`; with a COMMAND it returns only if
// it fails.
func runFrontSetup(args []string, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "relay front setup: %v\n", err)
		return exitUsage
	}
	userName, runArgs, command, err := splitSetupArgs(args)
	if err != nil {
		return fail(err)
	}
	cfg, err := loadRunConfig(runArgs)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			frontSetupUsage(stdout)
			return 0
		}
		return fail(err)
	}
	if cfg.front == nil {
		return fail(errors.New(`no "front-netns" (--front-netns): nothing to set up outside fronting mode`))
	}
	notify := os.Getenv("NOTIFY_SOCKET")
	if len(command) == 0 && notify == "" {
		return fail(errors.New("nothing would hold the device: give the relay's command after -- (relay front setup --user relay -- relay run ...), or run this as a systemd unit's ExecStartPre=+ (docs/deploy/relay-front.service)"))
	}
	var uid, gid int
	if len(command) > 0 {
		if uid, gid, err = lookupUser(userName); err != nil {
			return fail(err)
		}
		if command[0], err = exec.LookPath(command[0]); err != nil {
			return fail(err)
		}
	}
	files, err := front.Prepare(*cfg.front)
	switch {
	case errors.Is(err, front.ErrDeviceBusy) && len(command) == 0:
		fmt.Fprintf(stdout, "front: netns %s: device %s held already (the unit's file descriptor store, or a running relay): configured again\n",
			cfg.front.Namespace, cfg.front.Device)
		return 0
	case err != nil:
		return fail(err)
	}
	if len(command) == 0 {
		err := storeFiles(notify, files)
		files.Close()
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "front: netns %s: device %s made, in the unit's file descriptor store\n", cfg.front.Namespace, cfg.front.Device)
		return 0
	}
	err = execUnprivileged(uid, gid, command, files)
	files.Close()
	return fail(err)
}

// splitSetupArgs takes setup's own --user and the command after "--" out
// of args; the rest are relay run's flags.
func splitSetupArgs(args []string) (userName string, runArgs, command []string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			if i+1 == len(args) {
				return "", nil, nil, errors.New("-- without a command")
			}
			return userName, runArgs, args[i+1:], nil
		case a == "--user" || a == "-user":
			if i+1 == len(args) {
				return "", nil, nil, errors.New("--user: want a user name")
			}
			userName = args[i+1]
			i++
		case strings.HasPrefix(a, "--user=") || strings.HasPrefix(a, "-user="):
			_, userName, _ = strings.Cut(a, "=")
		default:
			runArgs = append(runArgs, a)
		}
	}
	if userName != "" {
		return "", nil, nil, errors.New("--user without -- COMMAND: under systemd the unit's User= or DynamicUser= runs the relay")
	}
	return "", runArgs, nil, nil
}

// lookupUser returns the user and primary group COMMAND runs as: name's,
// required when this process is root (the relay never runs as root).
func lookupUser(name string) (uid, gid int, err error) {
	if name == "" {
		if os.Geteuid() == 0 {
			return 0, 0, errors.New("--user: required as root (the relay runs as an unprivileged user, e.g. --user relay)")
		}
		return os.Geteuid(), os.Getegid(), nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		// A number names a user the image may not list (distroless).
		n, nerr := strconv.Atoi(name)
		if nerr != nil || n < 0 {
			return 0, 0, fmt.Errorf("--user %s: %w", name, err)
		}
		u = &user.User{Uid: name, Gid: name}
		if found, err := user.LookupId(name); err == nil {
			u = found
		}
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	if uid == 0 {
		return 0, 0, fmt.Errorf("--user %s: is root; want an unprivileged user", name)
	}
	return uid, gid, nil
}

// execUnprivileged execs command as uid:gid with no capabilities (bounding
// and ambient sets emptied, no_new_privs set) and files open across the
// exec, named in frontFDsEnv. It returns only on failure.
func execUnprivileged(uid, gid int, command []string, files *front.Files) error {
	// The bounding set and no_new_privs are per thread: set them on the
	// thread that execs.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var fds []string
	for _, f := range []struct {
		name string
		file *os.File
	}{{front.TUNFileName, files.TUN}, {front.NetlinkFileName, files.Netlink}} {
		rc, err := f.file.SyscallConn()
		if err != nil {
			return err
		}
		var ferr error
		if err := rc.Control(func(fd uintptr) {
			_, ferr = unix.FcntlInt(fd, unix.F_SETFD, 0) // survive the exec
			fds = append(fds, fmt.Sprintf("%s:%d", f.name, fd))
		}); err != nil || ferr != nil {
			return fmt.Errorf("keep %s open: %w", f.name, errors.Join(err, ferr))
		}
	}
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, frontFDsEnv+"=") && !strings.HasPrefix(kv, frontPIDEnv+"=") && !strings.HasPrefix(kv, "LISTEN_") {
			env = append(env, kv)
		}
	}
	env = append(env, frontFDsEnv+"="+strings.Join(fds, ","), frontPIDEnv+"="+strconv.Itoa(os.Getpid()))
	if err := dropPrivileges(uid, gid); err != nil {
		return err
	}
	return fmt.Errorf("exec %s: %w", command[0], syscall.Exec(command[0], command, env))
}

// dropPrivileges empties the calling thread's capability bounding and
// ambient sets, becomes uid:gid (all threads) and sets no_new_privs, so
// that what it execs holds no capability and cannot gain one.
func dropPrivileges(uid, gid int) error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	last := lastCap()
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			if !errors.Is(err, unix.EPERM) || os.Geteuid() == 0 {
				return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
			}
			break // unprivileged: nothing to drop that setuid would not
		}
	}
	if os.Geteuid() != uid || os.Getegid() != gid {
		if err := syscall.Setgroups([]int{gid}); err != nil {
			return fmt.Errorf("setgroups: %w", err)
		}
		if err := syscall.Setgid(gid); err != nil {
			return fmt.Errorf("setgid %d: %w", gid, err)
		}
		if err := syscall.Setuid(uid); err != nil {
			return fmt.Errorf("setuid %d: %w", uid, err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	return nil
}

// lastCap is the highest capability number the kernel knows.
func lastCap() int {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if n, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil {
		return n
	}
	return 63
}

// storeFiles puts files in the systemd unit's file descriptor store over
// the notify socket (one FDSTORE=1 message each, named front.TUNFileName
// and front.NetlinkFileName, not polled), then waits for systemd to have
// read them (BARRIER=1, sd_notify_barrier(3)): the store accepts them only
// from a process of the unit that is still running.
func storeFiles(socket string, files *front.Files) error {
	if strings.HasPrefix(socket, "@") {
		socket = "\x00" + socket[1:]
	}
	sock, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("notify socket: %w", err)
	}
	defer unix.Close(sock)
	to := &unix.SockaddrUnix{Name: socket}
	send := func(msg string, f *os.File) error {
		rc, err := f.SyscallConn()
		if err != nil {
			return err
		}
		var werr error
		if err := rc.Control(func(fd uintptr) {
			werr = unix.Sendmsg(sock, []byte(msg), unix.UnixRights(int(fd)), to, 0)
		}); err != nil {
			return err
		}
		return werr
	}
	for _, f := range []struct {
		name string
		file *os.File
	}{{front.TUNFileName, files.TUN}, {front.NetlinkFileName, files.Netlink}} {
		if err := send("FDSTORE=1\nFDPOLL=0\nFDNAME="+f.name, f.file); err != nil {
			return fmt.Errorf("store %s in the unit's file descriptor store: %w", f.name, err)
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	err = send("BARRIER=1", w)
	w.Close()
	if err != nil {
		return fmt.Errorf("notify barrier: %w", err)
	}
	r.SetReadDeadline(time.Now().Add(front.NotifyBarrierTimeout))
	if _, err := io.Copy(io.Discard, r); err != nil {
		return fmt.Errorf("notify barrier: systemd did not confirm within %v (FileDescriptorStoreMax= and NotifyAccess=exec set?): %w", front.NotifyBarrierTimeout, err)
	}
	return nil
}

// passedFrontFiles returns the device's files if a privileged step passed
// them to this process (frontFDsEnv, or systemd's LISTEN_FDS from the
// unit's file descriptor store), nil if none did.
func passedFrontFiles() (*front.Files, error) {
	byName := map[string]*os.File{}
	if v, ok := os.LookupEnv(frontFDsEnv); ok {
		pid := os.Getenv(frontPIDEnv)
		os.Unsetenv(frontFDsEnv)
		os.Unsetenv(frontPIDEnv)
		if pid == strconv.Itoa(os.Getpid()) {
			for _, item := range strings.Split(v, ",") {
				name, fdText, _ := strings.Cut(item, ":")
				fd, err := strconv.Atoi(fdText)
				if err != nil || fd < 3 {
					return nil, fmt.Errorf("%s=%q: want NAME:FD,...", frontFDsEnv, v)
				}
				syscall.CloseOnExec(fd)
				byName[name] = os.NewFile(uintptr(fd), name)
			}
		}
	} else {
		for _, f := range activation.Files(true) {
			byName[f.Name()] = f
		}
	}
	tun, nl := byName[front.TUNFileName], byName[front.NetlinkFileName]
	switch {
	case tun == nil && nl == nil:
		for _, f := range byName {
			f.Close()
		}
		return nil, nil
	case tun == nil || nl == nil:
		names := fileNames(byName)
		for _, f := range byName {
			f.Close()
		}
		return nil, fmt.Errorf("fronting: passed %s; want both %s and %s, as relay front setup passes them", names, front.TUNFileName, front.NetlinkFileName)
	}
	return &front.Files{TUN: tun, Netlink: nl}, nil
}

func fileNames(m map[string]*os.File) string {
	var names []string
	for n := range m {
		names = append(names, n)
	}
	return strings.Join(names, ", ")
}

// openFront serves the device a privileged step passed to this process, or
// else makes it here (front.Setup, which needs the privileges the unit no
// longer gives).
func openFront(cfg front.Config) (*front.Conn, error) {
	files, err := passedFrontFiles()
	if err != nil {
		return nil, err
	}
	if files != nil {
		c, err := front.Open(cfg, files)
		if err != nil {
			files.Close()
		}
		return c, err
	}
	c, err := front.Setup(cfg)
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		return nil, fmt.Errorf("%w; or make the device first with \"relay front setup\", which hands it to an unprivileged relay (docs/operations.md, \"Fronting mode\")", err)
	}
	return c, err
}

// routineFrontHost keeps the ship's device's list of the host's own
// addresses current (front.Conn.SetHostAddrs, every
// front.HostAddrsRefresh) until ctx ends, and logs a warning, within
// front.HostRefusalCheck and at most once a HostAddrsRefresh, when the
// ship has sent to them: those datagrams are refused unless declared
// (--front-host-lane).
func (d *daemon) routineFrontHost(ctx context.Context) {
	t := time.NewTicker(front.HostRefusalCheck)
	defer t.Stop()
	var logged, refreshed time.Time
	reported := d.front.Stats().SkippedToHost
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if now.Sub(refreshed) >= front.HostAddrsRefresh {
				d.front.SetHostAddrs(relaydaemon.InterfaceAddrs())
				refreshed = now
			}
			n := d.front.Stats().SkippedToHost
			if n == reported || now.Sub(logged) < front.HostAddrsRefresh {
				continue
			}
			d.log.Warn("fronting: the ship sent to this host's own addresses, refused (declare a lane it may reach with --front-host-lane)",
				zap.Uint64("refused", n-reported), zap.Uint64("refused_total", n))
			reported, logged = n, now
		}
	}
}
