package netnstest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"github.com/urbit-relay/relay/relay/route"
	"io"
	"net/netip"
	"sync"
	"time"

	"github.com/urbit-relay/relay/endpoint"
	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/transport"
)

// endpointSpec configures an endpoint process (the NETNSTEST_ENDPOINT
// value). Durations are nanoseconds; zero takes the endpoint's default.
type endpointSpec struct {
	Ship   string `json:"ship"`
	Listen string `json:"listen"`
	// Lanes are the lanes the endpoint starts with (ship → ADDR:PORT).
	Lanes map[string]string `json:"lanes"`
	// Sponsors are sponsor overrides (ship → sponsor).
	Sponsors     map[string]string `json:"sponsors,omitempty"`
	Retry        time.Duration     `json:"retry,omitempty"`
	Ping         time.Duration     `json:"ping,omitempty"` // negative: no pings
	Tick         time.Duration     `json:"tick,omitempty"`
	ProbeTimeout time.Duration     `json:"probe_timeout,omitempty"`
	// Publish publishes paths v/0 ... v/Publish-1, each holding
	// publishedValue of its ship and path.
	Publish int `json:"publish,omitempty"`
}

// command is one line on an endpoint process's stdin.
type command struct {
	ID      int           `json:"id"`
	Op      string        `json:"op"` // "peek" or "routes"
	Ship    string        `json:"ship"`
	Path    string        `json:"path,omitempty"`
	Timeout time.Duration `json:"timeout,omitempty"` // peek: give up after this
}

// report is one line on an endpoint process's stdout; Ev says which kind
// and so which fields are set.
type report struct {
	Ev string `json:"ev"` // ready, send, page, result, routes, error
	ID int    `json:"id,omitempty"`

	Addr string `json:"addr,omitempty"` // ready: the endpoint's lane

	Ship    string   `json:"ship,omitempty"`
	Path    string   `json:"path,omitempty"`
	Targets []string `json:"targets,omitempty"` // send
	Try     int      `json:"try,omitempty"`     // send

	From  string `json:"from,omitempty"` // page, result
	Next  string `json:"next,omitempty"` // page, result
	Hops  int    `json:"hops,omitempty"` // page, result
	Fresh bool   `json:"fresh,omitempty"`

	OK     bool    `json:"ok,omitempty"` // result
	Err    string  `json:"err,omitempty"`
	Data   string  `json:"data,omitempty"`
	Tries  int     `json:"tries,omitempty"`
	Millis float64 `json:"ms,omitempty"`
	// Start and End are the request's start and end, in nanoseconds of
	// the process's wall clock (result).
	Start int64 `json:"start,omitempty"`
	End   int64 `json:"end,omitempty"`

	Direct       string `json:"direct,omitempty"` // routes
	Hint         string `json:"hint,omitempty"`
	Base         string `json:"base,omitempty"`
	DirectProven bool   `json:"direct_proven,omitempty"`
	HintProven   bool   `json:"hint_proven,omitempty"`
	BaseProven   bool   `json:"base_proven,omitempty"`
}

// reportQueue is how many reports may wait for the stdout writer before
// Observe blocks the endpoint.
const reportQueue = 1 << 14

// publishedValue is what a publisher answers for path.
func publishedValue(ship, path string) string { return ship + " " + path }

// laneString prints a lane, or "" for none.
func laneString(ap netip.AddrPort) string {
	if !ap.IsValid() {
		return ""
	}
	return ap.String()
}

func keyString(k lane.Key) string {
	if !k.IsValid() {
		return ""
	}
	return k.AddrPort().String()
}

// runEndpointProcess is the endpoint process's main: it runs until stdin
// closes, and returns the exit code.
func runEndpointProcess(specJSON string, stdin io.Reader, stdout, stderr io.Writer) int {
	var spec endpointSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintf(stderr, "endpoint: bad spec: %v\n", err)
		return 2
	}
	cfg, err := spec.config()
	if err != nil {
		fmt.Fprintf(stderr, "endpoint: %v\n", err)
		return 2
	}
	listen, err := netip.ParseAddrPort(spec.Listen)
	if err != nil {
		fmt.Fprintf(stderr, "endpoint: listen: %v\n", err)
		return 2
	}
	conn, err := transport.ListenUDP(listen, transport.Options{})
	if err != nil {
		fmt.Fprintf(stderr, "endpoint: %v\n", err)
		return 2
	}
	reports := make(chan report, reportQueue)
	cfg.Observe = func(e endpoint.Event) { reports <- eventReport(e) }
	ep, err := endpoint.New(cfg, conn)
	if err != nil {
		conn.Close()
		fmt.Fprintf(stderr, "endpoint: %v\n", err)
		return 2
	}
	for i := 0; i < spec.Publish; i++ {
		path := fmt.Sprintf("v/%d", i)
		ep.Publish(path, []byte(publishedValue(spec.Ship, path)))
	}

	var writer sync.WaitGroup
	writer.Add(1)
	go func() {
		defer writer.Done()
		w := bufio.NewWriter(stdout)
		enc := json.NewEncoder(w)
		for r := range reports {
			enc.Encode(r)
			if len(reports) == 0 {
				w.Flush()
			}
		}
		w.Flush()
	}()
	ep.Start()
	reports <- report{Ev: "ready", Addr: ep.Addr().String()}

	ctx, cancel := context.WithCancel(context.Background())
	var requests sync.WaitGroup
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		var c command
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			reports <- report{Ev: "error", Err: fmt.Sprintf("bad command %q: %v", sc.Text(), err)}
			continue
		}
		ship, err := lane.ParseShip(c.Ship)
		if err != nil {
			reports <- report{Ev: "error", ID: c.ID, Err: err.Error()}
			continue
		}
		switch c.Op {
		case "peek":
			requests.Add(1)
			go func() {
				defer requests.Done()
				reports <- peek(ctx, ep, ship, c)
			}()
		case "routes":
			reports <- routesReport(ep.Routes(), ship, c.ID)
		default:
			reports <- report{Ev: "error", ID: c.ID, Err: "unknown op " + c.Op}
		}
	}
	cancel()
	requests.Wait()
	ep.Close()
	close(reports)
	writer.Wait()
	return 0
}

func (spec *endpointSpec) config() (endpoint.Config, error) {
	ship, err := lane.ParseShip(spec.Ship)
	if err != nil {
		return endpoint.Config{}, err
	}
	cfg := endpoint.Config{
		Ship: ship, Lanes: map[lane.Ship]netip.AddrPort{},
		RetryInterval: spec.Retry, PingInterval: spec.Ping, Tick: spec.Tick,
		Routes:   route.Config{ProbeTimeout: spec.ProbeTimeout},
		HintNets: []netip.Prefix{netip.MustParsePrefix("10.77.0.0/16"), netip.MustParsePrefix("127.0.0.0/8")},
	}
	for s, a := range spec.Lanes {
		sh, err := lane.ParseShip(s)
		if err != nil {
			return cfg, err
		}
		if cfg.Lanes[sh], err = netip.ParseAddrPort(a); err != nil {
			return cfg, err
		}
	}
	if len(spec.Sponsors) > 0 {
		cfg.Sponsors = &lane.Sponsors{}
		for s, sp := range spec.Sponsors {
			sh, err := lane.ParseShip(s)
			if err != nil {
				return cfg, err
			}
			spon, err := lane.ParseShip(sp)
			if err != nil {
				return cfg, err
			}
			if err := cfg.Sponsors.Set(sh, spon); err != nil {
				return cfg, err
			}
		}
	}
	return cfg, nil
}

func peek(ctx context.Context, ep *endpoint.Endpoint, ship lane.Ship, c command) report {
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	start := time.Now()
	resp, err := ep.Peek(ctx, ship, c.Path)
	end := time.Now()
	r := report{Ev: "result", ID: c.ID, Ship: c.Ship, Path: c.Path, Start: start.UnixNano(), End: end.UnixNano(),
		Millis: float64(end.Sub(start).Microseconds()) / 1000}
	if err != nil {
		r.Err = err.Error()
		return r
	}
	r.OK = true
	r.Data = string(resp.Data)
	r.Tries = resp.Tries
	r.From = laneString(resp.From)
	r.Next = laneString(resp.Next)
	r.Hops = resp.Hops
	return r
}

func eventReport(e endpoint.Event) report {
	r := report{Ship: e.Rcvr.String(), Path: e.Path}
	switch e.Kind {
	case endpoint.EventSend:
		r.Ev = "send"
		r.Try = e.Try
		for _, t := range e.Targets {
			r.Targets = append(r.Targets, t.String())
		}
	case endpoint.EventPage:
		r.Ev = "page"
		r.From, r.Next, r.Hops, r.Fresh = laneString(e.From), laneString(e.Next), e.Hops, e.Fresh
	}
	return r
}

func routesReport(rt *route.Table, ship lane.Ship, id int) report {
	r := report{Ev: "routes", ID: id, Ship: ship.String()}
	info, ok := rt.Info(ship)
	if !ok {
		return r
	}
	r.Direct, r.Hint, r.Base = keyString(info.Direct), keyString(info.Hint), keyString(info.Base)
	r.DirectProven, r.HintProven, r.BaseProven = info.DirectProven, info.HintProven, info.BaseProven
	return r
}
