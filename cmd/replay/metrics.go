package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// dropsMetric is the relay's drop counter in the Prometheus text format,
// one series per reason label.
const dropsMetric = "relay_drops_total"

// scrapeTimeout bounds one metrics request.
const scrapeTimeout = 5 * time.Second

// maxScrapeBytes bounds how much of a metrics page is read.
const maxScrapeBytes = 16 << 20

// scrapeDrops fetches url and returns relay_drops_total by reason.
func scrapeDrops(ctx context.Context, url string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics: %s", resp.Status)
	}
	return parseDrops(io.LimitReader(resp.Body, maxScrapeBytes))
}

// parseDrops reads the Prometheus text exposition format just far enough
// to find the samples of dropsMetric: lines "name{labels} value
// [timestamp]". Comments and other metrics are skipped; a sample without a
// reason label counts under "".
func parseDrops(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || !strings.HasPrefix(line, dropsMetric) {
			continue
		}
		rest := line[len(dropsMetric):]
		labels := ""
		switch {
		case strings.HasPrefix(rest, "{"):
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			labels, rest = rest[1:end], rest[end+1:]
		case strings.HasPrefix(rest, " "):
		default:
			continue // another metric sharing the prefix
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		out[labelValue(labels, "reason")] += v
	}
	return out, sc.Err()
}

// labelValue returns the value of label name in a Prometheus label list
// (name="value",...), unescaping \" \\ and \n.
func labelValue(labels, name string) string {
	for len(labels) > 0 {
		eq := strings.IndexByte(labels, '=')
		if eq < 0 || eq+1 >= len(labels) || labels[eq+1] != '"' {
			return ""
		}
		key := strings.TrimSpace(labels[:eq])
		var val strings.Builder
		i := eq + 2
		for ; i < len(labels) && labels[i] != '"'; i++ {
			c := labels[i]
			if c == '\\' && i+1 < len(labels) {
				i++
				switch labels[i] {
				case 'n':
					c = '\n'
				default:
					c = labels[i]
				}
			}
			val.WriteByte(c)
		}
		if key == name {
			return val.String()
		}
		labels = strings.TrimLeft(labels[min(i+1, len(labels)):], ", ")
	}
	return ""
}
