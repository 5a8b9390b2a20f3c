package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"
)

const (
	// defaultHealthURL is where the container image's relay serves
	// /healthz (see the Dockerfile's --metrics).
	defaultHealthURL = "http://127.0.0.1:9337/healthz"
	// defaultHealthTimeout bounds one health probe; Docker's own timeout
	// for the HEALTHCHECK is longer.
	defaultHealthTimeout = 2 * time.Second
)

// runHealth probes a relay's /healthz (or any URL): exit 0 when it answers
// 200, 1 otherwise. It exists for container health checks, since the
// image has no shell or curl.
func runHealth(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("relay health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", defaultHealthURL, "`URL` to probe")
	timeout := fs.Duration("timeout", defaultHealthTimeout, "give up after this long")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "relay health: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		fmt.Fprintf(stderr, "relay health: %v\n", err)
		return exitUsage
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "relay health: %v\n", err)
		return 1
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "relay health: %s: %s\n", *url, resp.Status)
		return 1
	}
	fmt.Fprintf(stdout, "%s: %s\n", *url, resp.Status)
	return 0
}
