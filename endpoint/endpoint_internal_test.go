package endpoint

import (
	"testing"
	"time"
)

func TestTimerWait(t *testing.T) {
	e := &Endpoint{cfg: Config{Tick: 50 * time.Millisecond}}
	cases := []struct{ now, next, want time.Duration }{
		{0, 0, 50 * time.Millisecond},                                          // due now: the next grid point
		{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond},  // rounded up to the grid
		{10 * time.Millisecond, 100 * time.Millisecond, 90 * time.Millisecond}, // on the grid
		{10 * time.Millisecond, never, maxTimerSleep + 40*time.Millisecond},    // nothing due: capped, on the grid, no overflow
		{time.Second, 500 * time.Millisecond, 50 * time.Millisecond},           // overdue
	}
	for _, c := range cases {
		if got := e.timerWait(c.now, c.next); got != c.want {
			t.Errorf("timerWait(%v, %v) = %v, want %v", c.now, c.next, got, c.want)
		}
	}
}
