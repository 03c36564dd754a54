package main

import (
	"log/slog"
	"os"
	"runtime/debug"
)

// defaultMemoryLimit is the Go runtime's soft memory limit for `ipledger
// serve` unless GOMEMLIMIT says otherwise. A large replace-all briefly
// holds about a hundred megabytes of live heap; under the limit the
// collector runs sooner instead of letting the process grow to twice that
// (the runtime caps the extra GC work: a larger live heap costs CPU, never
// an out-of-memory stop). It leaves about 100 MiB for what Go does not
// count, SQLite's page caches and statement journals (docs/decisions.md
// "A soft memory limit of 170 MiB").
const defaultMemoryLimit = 170 << 20

func setMemoryLimit(log *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetMemoryLimit(defaultMemoryLimit)
	log.Debug("Go memory limit", "bytes", defaultMemoryLimit)
}
