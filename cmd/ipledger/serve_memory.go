package main

import (
	"log/slog"
	"os"
	"runtime/debug"
)

// defaultMemoryLimit is the Go runtime's soft memory limit for `ipledger
// serve` unless GOMEMLIMIT says otherwise. A server's heap is tens of
// megabytes; a replace-all of 60,000 ExpectedMachines briefly holds a few
// hundred, and with the runtime's default pacing (GOGC=100) the process
// grew to about twice its live heap, 410–490 MiB. Under this limit the
// collector runs sooner instead (the runtime caps the extra GC work, so a
// larger live heap costs CPU, never an out-of-memory stop).
const defaultMemoryLimit = 224 << 20

func setMemoryLimit(log *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetMemoryLimit(defaultMemoryLimit)
	log.Debug("Go memory limit", "bytes", defaultMemoryLimit)
}
