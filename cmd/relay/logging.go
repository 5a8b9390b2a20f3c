package main

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/scry"
)

const (
	// packetLogBurst is how many per-datagram debug lines are written per
	// direction (read, sent) in each packetLogTick; the rest are dropped.
	// At 50 lines a second a debug log stays readable and costs the relay
	// nothing measurable even under a flood.
	packetLogBurst = 50
	// packetLogTick is the window packetLogBurst counts over.
	packetLogTick = time.Second
)

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// newLogger returns a logger writing to w at level: JSON, or console text
// when format is "console" or "auto" with w a terminal.
func newLogger(w io.Writer, format string, level zap.AtomicLevel) *zap.Logger {
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	var encoder zapcore.Encoder
	if tty := isTerminal(w); format == "console" || (format == "auto" && tty) {
		enc.EncodeLevel = zapcore.CapitalLevelEncoder
		if tty {
			enc.EncodeLevel = zapcore.CapitalColorLevelEncoder
		}
		encoder = zapcore.NewConsoleEncoder(enc)
	} else {
		encoder = zapcore.NewJSONEncoder(enc)
	}
	return zap.New(zapcore.NewCore(encoder, zapcore.Lock(zapcore.AddSync(w)), level))
}

// sampledLogger returns log limited to packetLogBurst entries per message
// per packetLogTick, the rest dropped: the per-datagram debug logs' limiter.
func sampledLogger(log *zap.Logger) *zap.Logger {
	return log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, packetLogTick, packetLogBurst, 0)
	}))
}

// decisionLogger is the relay.ServerConfig.Decisions of the debug log: a
// "decision" line per datagram decided, saying what the relay did (action,
// the drop reason, the lanes sent to), at most packetLogBurst per
// packetLogTick, as the datagram lines are. While the level is above debug
// it costs an atomic load per datagram.
type decisionLogger struct {
	log     *zap.Logger // writes the lines Want admitted
	sampled *zap.Logger // admits them
	level   zap.AtomicLevel
}

func newDecisionLogger(log *zap.Logger, level zap.AtomicLevel) *decisionLogger {
	return &decisionLogger{log: log, sampled: sampledLogger(log), level: level}
}

// Want admits the next decision if the level is debug and the sampler has
// room in this tick.
func (l *decisionLogger) Want() bool {
	return l.level.Enabled(zapcore.DebugLevel) && l.sampled.Check(zapcore.DebugLevel, "decision") != nil
}

// Log writes the decision's line.
func (l *decisionLogger) Log(d *relay.Decision) {
	targets := make([]string, 0, len(d.Sends))
	for i := range d.Sends {
		if i < len(d.Ports) && d.Ports[i] == relay.PortShip {
			continue // counted in to_ship
		}
		targets = append(targets, d.Sends[i].Addr.String())
	}
	fields := []zap.Field{
		zap.Stringer("action", d.Action),
		zap.Stringer("kind", d.Kind),
		zap.Int("len", d.Len),
		zap.Strings("targets", targets),
	}
	if d.FromShip {
		fields = append(fields, zap.Bool("from_ship", true), zap.Stringer("to", d.To))
	} else {
		fields = append(fields, zap.Stringer("from", d.From))
	}
	if d.Reason != "" {
		fields = append(fields, zap.String("reason", d.Reason))
	}
	if d.ToShip > 0 {
		fields = append(fields, zap.Int("to_ship", d.ToShip))
	}
	l.log.Debug("decision", fields...)
}

// packetLogger returns a relay.ServerConfig.Tap that logs every datagram
// read and sent at debug level, at most packetLogBurst per direction per
// packetLogTick. While the level is above debug it costs one atomic load
// per datagram; the datagram is described only for lines actually written.
// Each line carries the datagram as hex, which `relay decode` reads.
func packetLogger(log *zap.Logger, level zap.AtomicLevel) func(in bool, local, remote netip.AddrPort, b []byte) {
	sampled := sampledLogger(log)
	return func(in bool, local, remote netip.AddrPort, b []byte) {
		if !level.Enabled(zapcore.DebugLevel) {
			return
		}
		msg := "datagram sent"
		if in {
			msg = "datagram read"
		}
		ce := sampled.Check(zapcore.DebugLevel, msg)
		if ce == nil {
			return
		}
		ce.Write(
			zap.Stringer("local", local),
			zap.Stringer("remote", remote),
			zap.Int("len", len(b)),
			zap.String("packet", describePacket(b)),
			zap.String("hex", hex.EncodeToString(b)),
		)
	}
}

// describePacket summarises a datagram in a few words: protocol, type, hop
// count, and for mesa the name's ship and path.
func describePacket(b []byte) string {
	if !scry.IsMesa(b) {
		var a scry.AmesPacket
		if err := a.Parse(b); err != nil {
			return "ames (malformed)"
		}
		return "ames " + a.Sndr.String() + " -> " + a.Rcvr.String()
	}
	var p scry.Packet
	if err := p.Parse(b); err != nil {
		return "mesa (malformed)"
	}
	s := "mesa " + p.Header.Type.String() + " hops " + strconv.Itoa(int(p.Header.Hops)) +
		" " + p.Name.Ship.String() + " " + printablePath(p.Name.Path)
	if ap, ok := p.NextHopAddr(); ok {
		s += " next " + ap.String()
	}
	return s
}

// startupFailed reports err, why `relay run` could not start, as one line
// on w and returns the exit code, exitUsage. The line is in the format the
// log would have had: a JSON log entry ("start-up failed", the message in
// "error") for format json, or auto when w is not a terminal, so that a
// journal or log collector reading JSON gets JSON; else the plain
// "relay run: ..." line.
func startupFailed(w io.Writer, format string, err error) int {
	if format == "json" || (format != "console" && !isTerminal(w)) {
		log := newLogger(w, "json", zap.NewAtomicLevelAt(zapcore.InfoLevel))
		log.Error("start-up failed", zap.String("error", err.Error()))
		_ = log.Sync()
		return exitUsage
	}
	fmt.Fprintf(w, "relay run: %v\n", err)
	return exitUsage
}
