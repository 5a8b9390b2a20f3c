package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/pki"
)

// relay pki fetch: write the --pki snapshot from where Urbit's keys are,
// over JSON-RPC. The requests and answers are relay/pki's codecs
// (AzimuthPointsCall, ParseAzimuthPoint, RollerPointParams,
// ParseRollerPoint); this file does the HTTP and the file.

const (
	// defaultFetchBatch is how many ships one JSON-RPC batch asks for.
	// Public Ethereum endpoints cap batches (commonly at 100 to 1000
	// calls); vere's own boot asks the roller for all 256 galaxies in one.
	defaultFetchBatch = 64
	// maxFetchBatch caps --batch at what the endpoints named above take.
	maxFetchBatch = 1000
	// defaultFetchTimeout bounds one batch's round trip.
	defaultFetchTimeout = 30 * time.Second
	// maxRPCResponseBytes caps one batch's answer: a point is under 1 KiB
	// of JSON from the roller and 700 bytes from eth_call, so a full batch
	// is under 1 MiB; 16 MiB is room for verbose endpoints.
	maxRPCResponseBytes = 16 << 20
	// maxShipsFileBytes caps a --ships file: pki.DefaultMaxEntries lines of
	// a planet's @p (14 bytes and a newline) is under 8 MiB.
	maxShipsFileBytes = 16 << 20
)

// runPKI dispatches relay pki's subcommands.
func runPKI(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "fetch" {
		return runPKIFetch(args[1:], stdin, stdout, stderr, time.Now)
	}
	fmt.Fprint(stderr, `usage: relay pki fetch (--roller URL | --eth URL [--contract ADDR]) [--galaxies] [--ships FILE] [SHIP ...] [--out FILE]

Writes the snapshot relay run --pki reads: one line per galaxy, star or
planet with networking keys. --roller asks a naive-rollup roller's getPoint
(the API vere boots from: layer 1 and layer 2 ships); --eth calls Azimuth's
points(uint32) on an Ethereum JSON-RPC endpoint (layer 1 state only).
`)
	return exitUsage
}

// fetchSource is where the points come from.
type fetchSource int

const (
	sourceRoller fetchSource = iota
	sourceEth
)

// runPKIFetch is relay pki fetch. now stamps the file's header.
func runPKIFetch(args []string, stdin io.Reader, stdout, stderr io.Writer, now func() time.Time) int {
	fs := flag.NewFlagSet("relay pki fetch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	roller := fs.String("roller", "", "naive-rollup roller JSON-RPC `URL` (getPoint), as vere's --ethereum boots from")
	eth := fs.String("eth", "", "Ethereum JSON-RPC `URL` (eth_call to Azimuth.points; layer 1 ships only)")
	contract := fs.String("contract", pki.AzimuthMainnet, "Azimuth contract `ADDRESS` for --eth")
	shipsFile := fs.String("ships", "", "`FILE` of ships, one @p (or decimal) a line, '#' comments; - for stdin")
	galaxies := fs.Bool("galaxies", false, "include all 256 galaxies")
	out := fs.String("out", "-", "snapshot `FILE` to write (replaced whole, atomically); - for stdout")
	batch := fs.Int("batch", defaultFetchBatch, "ships per JSON-RPC batch (1 to 1000)")
	timeout := fs.Duration("timeout", defaultFetchTimeout, "give up on a batch after this long")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "relay pki fetch: "+format+"\n", a...)
		return exitUsage
	}
	var src fetchSource
	var url string
	switch {
	case (*roller == "") == (*eth == ""):
		return usageErr("give one of --roller URL or --eth URL")
	case *roller != "":
		src, url = sourceRoller, *roller
	default:
		src, url = sourceEth, *eth
	}
	if *batch < 1 || *batch > maxFetchBatch {
		return usageErr("--batch %d: want 1 to %d", *batch, maxFetchBatch)
	}
	if src == sourceEth && !isEthAddress(*contract) {
		return usageErr("--contract %q: want 0x and 40 hex digits", *contract)
	}
	var sl shipList
	if *galaxies {
		for g := uint64(0); g < 256; g++ {
			sl.add(lane.ShipFromUint64(g))
		}
	}
	if *shipsFile != "" {
		r := stdin
		if *shipsFile != "-" {
			f, err := os.Open(*shipsFile)
			if err != nil {
				return usageErr("%v", err)
			}
			defer f.Close()
			r = f
		}
		if err := sl.read(io.LimitReader(r, maxShipsFileBytes+1), *shipsFile); err != nil {
			return usageErr("%v", err)
		}
	}
	for _, a := range fs.Args() {
		if err := sl.parse(a, "argument"); err != nil {
			return usageErr("%v", err)
		}
	}
	if len(sl.ships) == 0 {
		return usageErr("no ships: give --galaxies, --ships FILE or ships as arguments")
	}
	if len(sl.ships) > pki.DefaultMaxEntries {
		return usageErr("%d ships: a snapshot holds at most %d", len(sl.ships), pki.DefaultMaxEntries)
	}

	c := &rpcClient{url: url, timeout: *timeout, hc: http.DefaultClient}
	f := fetcher{src: src, contract: *contract, rpc: c}
	var snap []byte
	var skipped []string
	for i := 0; i < len(sl.ships); i += *batch {
		part := sl.ships[i:min(i+*batch, len(sl.ships))]
		points, err := f.fetch(context.Background(), part)
		if err != nil {
			fmt.Fprintf(stderr, "relay pki fetch: %v\n", err)
			return 1
		}
		for j, p := range points {
			e, err := p.Entry(part[j])
			if errors.Is(err, pki.ErrNoKeys) {
				skipped = append(skipped, err.Error())
				continue
			}
			snap = e.AppendLine(snap)
		}
	}
	kind := map[fetchSource]string{sourceRoller: "the roller's getPoint", sourceEth: "Azimuth.points over eth_call at " + *contract}[src]
	head := fmt.Sprintf("# relay pki fetch: %d of %d ships, from %s, %s\n# @p life rift pass\n",
		len(sl.ships)-len(skipped), len(sl.ships), kind, now().UTC().Format(time.RFC3339))
	snap = append([]byte(head), snap...)
	// The file must parse as relay run --pki will read it.
	if _, err := pki.ParseSnapshot(snap, 0); err != nil {
		fmt.Fprintf(stderr, "relay pki fetch: %v\n", err)
		return 1
	}
	if err := writeSnapshot(*out, snap, stdout); err != nil {
		fmt.Fprintf(stderr, "relay pki fetch: %v\n", err)
		return 1
	}
	for _, s := range skipped {
		fmt.Fprintf(stderr, "relay pki fetch: skipped %s\n", s)
	}
	fmt.Fprintf(stderr, "relay pki fetch: %d ships written, %d without networking keys skipped\n",
		len(sl.ships)-len(skipped), len(skipped))
	return 0
}

// isEthAddress reports whether s is "0x" and 40 hex digits.
func isEthAddress(s string) bool {
	h, ok := strings.CutPrefix(s, "0x")
	if !ok || len(h) != 40 {
		return false
	}
	for _, c := range h {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}

// shipList is the ships to fetch, in first-seen order, each once.
type shipList struct {
	ships []lane.Ship
	seen  map[lane.Ship]bool
}

func (l *shipList) add(s lane.Ship) {
	if l.seen == nil {
		l.seen = make(map[lane.Ship]bool)
	}
	if !l.seen[s] {
		l.seen[s] = true
		l.ships = append(l.ships, s)
	}
}

// parse adds one ship written as @p or decimal; where says where it was.
func (l *shipList) parse(s, where string) error {
	ship, err := lane.ParseShip(s)
	if err != nil {
		return fmt.Errorf("%s: %v", where, err)
	}
	switch ship.Class() {
	case lane.Moon:
		return fmt.Errorf("%s: %s is a moon: its key is set by its planet, not in Azimuth", where, ship)
	case lane.Comet:
		return fmt.Errorf("%s: %s is a comet: the relay learns a comet's key from its attestation", where, ship)
	}
	l.add(ship)
	return nil
}

// read adds the ships of r, one a line.
func (l *shipList) read(r io.Reader, name string) error {
	sc := bufio.NewScanner(r)
	total := 0
	for n := 1; sc.Scan(); n++ {
		total += len(sc.Bytes()) + 1
		if total > maxShipsFileBytes {
			return fmt.Errorf("%s: more than %d bytes", name, maxShipsFileBytes)
		}
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		if err := l.parse(line, fmt.Sprintf("%s:%d", name, n)); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	return nil
}

// fetcher asks one source for points.
type fetcher struct {
	src      fetchSource
	contract string
	rpc      *rpcClient
}

// fetch returns the chain state of ships, in order. Any call's error (a
// JSON-RPC error object, a malformed answer) fails the whole batch: a
// snapshot missing ships silently would read as "no such ship".
func (f *fetcher) fetch(ctx context.Context, ships []lane.Ship) ([]pki.ChainPoint, error) {
	reqs := make([]rpcRequest, len(ships))
	for i, s := range ships {
		reqs[i] = rpcRequest{JSONRPC: "2.0", ID: strconv.Itoa(i)}
		switch f.src {
		case sourceEth:
			data, err := pki.AzimuthPointsCall(s)
			if err != nil {
				return nil, err
			}
			reqs[i].Method = "eth_call"
			reqs[i].Params = []any{map[string]string{"to": f.contract, "data": data}, "latest"}
		case sourceRoller:
			params, err := pki.RollerPointParams(s)
			if err != nil {
				return nil, err
			}
			reqs[i].Method = "getPoint"
			reqs[i].Params = params
		}
	}
	resps, err := f.rpc.batch(ctx, reqs)
	if err != nil {
		return nil, err
	}
	points := make([]pki.ChainPoint, len(ships))
	for i, r := range resps {
		if r.Error != nil {
			return nil, fmt.Errorf("%s: %s: error %d: %s", ships[i], reqs[i].Method, r.Error.Code, r.Error.Message)
		}
		switch f.src {
		case sourceEth:
			var hexResult string
			if err := json.Unmarshal(r.Result, &hexResult); err != nil {
				return nil, fmt.Errorf("%s: eth_call result: %v", ships[i], err)
			}
			points[i], err = pki.ParseAzimuthPoint(hexResult)
		case sourceRoller:
			points[i], err = pki.ParseRollerPoint(r.Result)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %v", ships[i], err)
		}
	}
	return points, nil
}

// rpcRequest and rpcResponse are JSON-RPC 2.0's request and response
// objects (ids are strings: vere's boot sends strings too).
type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      string `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

type rpcResponse struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// rpcClient posts JSON-RPC batches to one URL.
type rpcClient struct {
	url     string
	timeout time.Duration
	hc      *http.Client
}

// batch posts reqs as one JSON-RPC batch and returns the responses in the
// order of reqs, matched by id (a batch's answers may come in any order).
// Every request must be answered exactly once.
func (c *rpcClient) batch(ctx context.Context, reqs []rpcRequest) ([]rpcResponse, error) {
	body, err := json.Marshal(reqs)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxRPCResponseBytes+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > maxRPCResponseBytes {
		return nil, fmt.Errorf("JSON-RPC answer longer than %d bytes", maxRPCResponseBytes)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("JSON-RPC: HTTP %s", resp.Status)
	}
	var got []rpcResponse
	if err := json.Unmarshal(raw, &got); err != nil {
		return nil, fmt.Errorf("JSON-RPC batch answer: %v", err)
	}
	out := make([]rpcResponse, len(reqs))
	seen := make([]bool, len(reqs))
	for _, r := range got {
		var id string
		if json.Unmarshal(r.ID, &id) != nil {
			var n int
			if json.Unmarshal(r.ID, &n) != nil {
				return nil, fmt.Errorf("JSON-RPC answer with id %s", r.ID)
			}
			id = strconv.Itoa(n)
		}
		i, err := strconv.Atoi(id)
		if err != nil || i < 0 || i >= len(reqs) || seen[i] {
			return nil, fmt.Errorf("JSON-RPC answer with id %s: not one asked, or twice", r.ID)
		}
		out[i], seen[i] = r, true
	}
	for i, ok := range seen {
		if !ok {
			return nil, fmt.Errorf("JSON-RPC: no answer for %s (id %d)", reqs[i].Method, i)
		}
	}
	return out, nil
}

// writeSnapshot writes b to path through a temporary file and a rename,
// so that a relay reloading --pki (SIGHUP) never reads half a file; "-"
// writes to stdout.
func writeSnapshot(path string, b []byte, stdout io.Writer) error {
	if path == "-" {
		_, err := stdout.Write(b)
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
