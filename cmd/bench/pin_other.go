//go:build !linux

package main

import "errors"

func pinProcess(int) error { return errors.New("pinning to a CPU needs Linux") }

func cpus() int { return 1 }

// pause and resume need SIGSTOP and SIGCONT; here they do nothing, and
// canPause keeps measureTogether from relying on them.
func (c *child) pause()  {}
func (c *child) resume() {}

const canPause = false
