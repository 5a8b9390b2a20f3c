//go:build !linux

package main

import "errors"

func pinProcess(int) error { return errors.New("pinning to a CPU needs Linux") }

func cpus() int { return 1 }
