package main

import (
	"fmt"

	sd "github.com/coreos/go-systemd/v22/daemon"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// sdNotify tells the service manager (a systemd unit of Type=notify, whose
// $NOTIFY_SOCKET it writes to) the daemon's state: READY=1 once the socket
// serves, RELOADING=1 and READY=1 around a reload, STOPPING=1 as it stops.
// Without $NOTIFY_SOCKET it does nothing. A failed send is logged, not
// fatal: the relay serves either way.
func sdNotify(log *zap.Logger, state string) {
	if _, err := sd.SdNotify(false, state); err != nil {
		log.Warn("systemd notify failed", zap.String("state", state), zap.Error(err))
	}
}

// reloadingState is the RELOADING=1 notification, with the CLOCK_MONOTONIC
// time systemd's Type=notify-reload wants with it.
func reloadingState() string {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return "RELOADING=1"
	}
	return fmt.Sprintf("RELOADING=1\nMONOTONIC_USEC=%d", ts.Nano()/1000)
}
