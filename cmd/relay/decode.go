package main

import "io"

func runDecode(args []string, stdin io.Reader, stdout, stderr io.Writer) int { return 1 }
