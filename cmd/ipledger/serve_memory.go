package main

import (
	"log/slog"
	"os"
	"runtime/debug"
)

// defaultMemoryLimit is the Go runtime's soft memory limit for `ipledger
// serve` unless GOMEMLIMIT says otherwise. A server's heap is tens of
// megabytes; a replace-all of 60,000 ExpectedMachines briefly holds about
// a hundred, and with the runtime's default pacing (GOGC=100) the process
// grew to about twice its live heap, 410–490 MiB. Under this limit the
// collector runs sooner instead (the runtime caps the extra GC work, so a
// larger live heap costs CPU, never an out-of-memory stop). The limit
// leaves room for what the Go runtime does not count: SQLite's page
// caches and statement journals, about 100 MiB at the peak of that
// replace-all (224 MiB let the process reach 310–320 MiB; 170 MiB kept it
// at 275 MiB for the same CPU time, docs/benchmarks.md "Imports").
const defaultMemoryLimit = 170 << 20

func setMemoryLimit(log *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetMemoryLimit(defaultMemoryLimit)
	log.Debug("Go memory limit", "bytes", defaultMemoryLimit)
}
