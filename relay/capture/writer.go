package capture

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Stats counts what a Writer did.
type Stats struct {
	// Records and Bytes are what reached the files (Bytes includes file and
	// record headers). Records still in memory are in neither until they
	// are written (at most FlushInterval later, or at Close).
	Records, Bytes uint64
	// Dropped counts records lost: no free chunk (the disk fell behind),
	// a failed write, an invalid lane, or a Tap after Close.
	Dropped uint64
	// Rotations counts files started after the first.
	Rotations uint64
	// WriteErrors counts failed file operations (create, write, rename).
	WriteErrors uint64
}

// chunk is a buffer of formatted records, moved whole between Tap and the
// disk goroutine.
type chunk struct {
	buf     []byte
	records uint64
}

// chunkSink is the io.Writer the record formatter writes into: it appends
// to the current chunk, which always has room (Tap checks first).
type chunkSink struct{ c *chunk }

func (s *chunkSink) Write(p []byte) (int, error) {
	s.c.buf = append(s.c.buf, p...)
	return len(p), nil
}

// Writer is a bounded, rotating pcap capture fed by Tap from any number of
// goroutines. Create it with NewRotating; Close it to flush.
type Writer struct {
	// Static after construction.
	path     string
	maxBytes int64
	maxFiles int
	chunkCap int
	full     chan *chunk // chunks for the disk goroutine, in order; never blocks (cap = Chunks)
	free     chan *chunk // empty chunks
	done     chan struct{}
	flushReq chan chan struct{} // flushNow's requests to routineDisk
	wg       sync.WaitGroup
	once     sync.Once

	mu      sync.Mutex
	cur     *chunk         // guarded by mu; nil when none was free
	sink    chunkSink      // guarded by mu
	pw      *pcapgo.Writer // guarded by mu; formats records into sink
	scratch []byte         // guarded by mu; the IP packet being formatted
	closed  bool           // guarded by mu

	// Owned by routineDisk (and by NewRotating before it starts).
	f    *os.File
	size int64

	records, bytes, dropped, rotations, writeErrs atomic.Uint64

	errMu    sync.Mutex
	firstErr error // guarded by errMu
}

// NewRotating starts a capture at path. When writing a chunk would take the
// current file past maxBytes, the file is closed and the older files shift:
// path becomes path.1, path.1 becomes path.2, and so on up to
// path.(maxFiles-1); the oldest is removed. An existing file at path (a
// previous run's capture) is shifted the same way rather than overwritten.
// maxBytes must be at least MinMaxBytes and maxFiles at least 1.
func NewRotating(path string, maxBytes int64, maxFiles int) (*Writer, error) {
	if maxBytes < MinMaxBytes {
		return nil, fmt.Errorf("capture: max bytes %d is below the minimum %d", maxBytes, MinMaxBytes)
	}
	if maxFiles < 1 {
		return nil, fmt.Errorf("capture: max files %d is below 1", maxFiles)
	}
	w := &Writer{
		path: path, maxBytes: maxBytes, maxFiles: maxFiles,
		chunkCap: int(min(int64(ChunkBytes), maxBytes-FileHeaderLen)),
		full:     make(chan *chunk, Chunks),
		free:     make(chan *chunk, Chunks),
		done:     make(chan struct{}),
		flushReq: make(chan chan struct{}),
		scratch:  make([]byte, 0, Snaplen+IPv6HeaderLen+UDPHeaderLen),
	}
	for range Chunks {
		w.free <- &chunk{buf: make([]byte, 0, w.chunkCap)}
	}
	w.pw = pcapgo.NewWriterNanos(&w.sink)
	if err := w.openFile(); err != nil {
		return nil, err
	}
	w.wg.Add(1)
	go w.routineDisk()
	return w, nil
}

// Tap records one datagram of the process whose socket has lane local:
// remote → local when in is set (a datagram read), local → remote when not
// (a datagram sent). It copies b and keeps no reference to it. It does not
// block on I/O and does not allocate; safe for concurrent use.
func (w *Writer) Tap(in bool, local, remote netip.AddrPort, b []byte) {
	if in {
		w.add(remote, local, b)
	} else {
		w.add(local, remote, b)
	}
}

func (w *Writer) add(src, dst netip.AddrPort, b []byte) {
	if !src.IsValid() || !dst.IsValid() {
		w.dropped.Add(1)
		return
	}
	plen, _ := packetLen(src, dst, len(b))
	need := RecordHeaderLen + min(plen, Snaplen)
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		w.dropped.Add(1)
		return
	}
	if w.cur != nil && len(w.cur.buf)+need > w.chunkCap {
		w.full <- w.cur
		w.cur = nil
	}
	if w.cur == nil {
		select {
		case c := <-w.free:
			c.buf, c.records = c.buf[:0], 0
			w.cur = c
			w.sink.c = c
		default:
			w.mu.Unlock()
			w.dropped.Add(1)
			return
		}
	}
	w.scratch = appendPacket(w.scratch[:0], src, dst, b)
	// The sink cannot fail and the capture info is consistent, so
	// writeRecord cannot either.
	_ = writeRecord(w.pw, time.Now(), w.scratch)
	w.cur.records++
	w.mu.Unlock()
}

// Stats returns the writer's counts so far.
func (w *Writer) Stats() Stats {
	return Stats{
		Records: w.records.Load(), Bytes: w.bytes.Load(), Dropped: w.dropped.Load(),
		Rotations: w.rotations.Load(), WriteErrors: w.writeErrs.Load(),
	}
}

// Close writes every buffered record, closes the file and stops the disk
// goroutine. Later Taps are dropped. It returns the first error the writer
// met, if any; it is idempotent.
func (w *Writer) Close() error {
	w.once.Do(func() {
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
		close(w.done)
	})
	w.wg.Wait()
	w.errMu.Lock()
	defer w.errMu.Unlock()
	return w.firstErr
}

// routineDisk writes full chunks as they come, the current chunk every
// FlushInterval, and everything at Close.
func (w *Writer) routineDisk() {
	defer w.wg.Done()
	t := time.NewTicker(FlushInterval)
	defer t.Stop()
	for {
		select {
		case c := <-w.full:
			w.writeChunk(c)
		case <-t.C:
			w.flush()
		case ack := <-w.flushReq:
			w.flush()
			close(ack)
		case <-w.done:
			// closed was set before done was closed, so nothing more
			// is added.
			w.flush()
			if w.f != nil {
				if err := w.f.Close(); err != nil {
					w.fail(err)
				}
				w.f = nil
			}
			return
		}
	}
}

// flushNow has the disk goroutine flush, as it does every FlushInterval,
// and returns when it has (or at once after Close). Tests call it where
// they would otherwise wait for the disk goroutine to catch up.
func (w *Writer) flushNow() {
	ack := make(chan struct{})
	select {
	case w.flushReq <- ack:
		<-ack
	case <-w.done:
	}
}

// flush writes the queued chunks, then the one being filled.
func (w *Writer) flush() {
	for drained := false; !drained; {
		select {
		case c := <-w.full:
			w.writeChunk(c)
		default:
			drained = true
		}
	}
	w.mu.Lock()
	c := w.cur
	if c == nil || len(c.buf) == 0 {
		w.mu.Unlock()
		return
	}
	w.cur = nil
	w.mu.Unlock()
	w.writeChunk(c)
}

// writeChunk appends c to the current file, rotating first if it would not
// fit, and returns c to the free list.
func (w *Writer) writeChunk(c *chunk) {
	defer func() { w.free <- c }()
	if len(c.buf) == 0 {
		return
	}
	if w.f != nil && w.size+int64(len(c.buf)) > w.maxBytes {
		if err := w.f.Close(); err != nil {
			w.fail(err)
		}
		w.f = nil
		w.rotations.Add(1)
	}
	if w.f == nil {
		if err := w.openFile(); err != nil {
			w.dropped.Add(c.records)
			return
		}
	}
	n, err := w.f.Write(c.buf)
	w.size += int64(n)
	w.bytes.Add(uint64(n))
	if err != nil {
		w.fail(err)
		w.dropped.Add(c.records)
		// Start a fresh file next time rather than append to a file
		// that may end in a partial record.
		_ = w.f.Close()
		w.f = nil
		return
	}
	w.records.Add(c.records)
}

// openFile shifts an existing file at path out of the way and starts a new
// one with a pcap file header.
func (w *Writer) openFile() error {
	if fi, err := os.Stat(w.path); err == nil && fi.Size() > 0 {
		if err := w.shift(); err != nil {
			return w.fail(err)
		}
	}
	f, err := os.OpenFile(w.path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, FileMode)
	if err != nil {
		return w.fail(err)
	}
	// OpenFile's mode applies only to a file it creates; an empty file
	// left at the path keeps its own unless set.
	if err := f.Chmod(FileMode); err != nil {
		_ = f.Close()
		return w.fail(err)
	}
	if err := pcapgo.NewWriterNanos(f).WriteFileHeader(Snaplen, layers.LinkTypeRaw); err != nil {
		_ = f.Close()
		return w.fail(err)
	}
	w.f, w.size = f, FileHeaderLen
	w.bytes.Add(FileHeaderLen)
	return nil
}

// shift renames path.i to path.(i+1) from the oldest down, removing the
// oldest, and path to path.1 (or removes path when maxFiles is 1).
func (w *Writer) shift() error {
	name := func(i int) string {
		if i == 0 {
			return w.path
		}
		return w.path + "." + strconv.Itoa(i)
	}
	last := w.maxFiles - 1
	if err := os.Remove(name(last)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for i := last - 1; i >= 0; i-- {
		if err := os.Rename(name(i), name(i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// fail counts err, keeps it if it is the first, and returns it wrapped.
func (w *Writer) fail(err error) error {
	err = fmt.Errorf("capture: %w", err)
	w.writeErrs.Add(1)
	w.errMu.Lock()
	if w.firstErr == nil {
		w.firstErr = err
	}
	w.errMu.Unlock()
	return err
}
