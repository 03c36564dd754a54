package database

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"
)

// StorageProbeInterval is how long the storage must have refused no write
// before StorageWatch tries its probe write, and how long it waits after
// a probe that failed.
const StorageProbeInterval = 5 * time.Second

// storageProbeSetting is the settings row the probe writes: the time of
// the last probe that committed.
const storageProbeSetting = "storage_probe"

// StorageWatch follows whether the database's storage takes writes
// (docs/operations.md "A full disk"). Every handle Open returns has one
// (StorageWatchOf), shared by the handle's sessions and transactions.
//
// The first write refused for lack of space (IsStorageFull) makes the
// storage full: one log line, Full reports it (readiness, the
// ipledger_storage_full gauge), RefusedWrites counts that write and every
// later one. The storage is fine again once a write commits. A server
// that is not ready may get no writes at all, and a client's write that
// commits may have written nothing, so the watch writes itself: once no
// write has been refused for StorageProbeInterval it upserts one
// settings row, and the first probe that commits ends the state, with
// one more log line (docs/decisions.md "Readiness returns through a
// write of the server's own").
type StorageWatch struct {
	db       *gorm.DB
	interval time.Duration

	refused atomic.Uint64
	isFull  atomic.Bool

	mu    sync.Mutex
	since time.Time // the first refusal of this episode
	last  time.Time // the latest refusal, or failed probe
}

const storageWatchName = "ipledger:storage-watch"

// Name makes StorageWatch a gorm plugin, found again by StorageWatchOf.
func (w *StorageWatch) Name() string { return storageWatchName }

// Initialize keeps the handle the probe writes through.
func (w *StorageWatch) Initialize(db *gorm.DB) error {
	w.db = db
	return nil
}

// StorageWatchOf returns db's watch, or nil for a handle that Open did
// not make; a nil watch reports storage that takes writes and ignores
// what it is told.
func StorageWatchOf(db *gorm.DB) *StorageWatch {
	if db == nil || db.Config == nil {
		return nil
	}
	w, _ := db.Config.Plugins[storageWatchName].(*StorageWatch)
	return w
}

// Full reports whether the storage refuses writes, and since when.
func (w *StorageWatch) Full() (bool, time.Time) {
	if w == nil || !w.isFull.Load() {
		return false, time.Time{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.isFull.Load(), w.since
}

// RefusedWrites counts the write transactions refused for lack of space
// since the handle was opened.
func (w *StorageWatch) RefusedWrites() uint64 {
	if w == nil {
		return 0
	}
	return w.refused.Load()
}

// Refused records a write transaction that err (IsStorageFull) refused.
func (w *StorageWatch) Refused(err error) {
	if w == nil {
		return
	}
	w.refused.Add(1)
	now := time.Now()
	w.mu.Lock()
	w.last = now
	begins := !w.isFull.Load()
	if begins {
		w.since = now
		w.isFull.Store(true)
	}
	w.mu.Unlock()
	if begins {
		slog.Error("database storage is full: writes are answered 503 and /readyz reports not ready until one commits again",
			"error", err.Error(), "probe_interval", w.interval.String())
		go w.probe()
	}
}

// probe waits for a quiet period after the latest refusal, then writes
// the probe row, until one commits. It returns without ending the state
// when the handle is closed.
func (w *StorageWatch) probe() {
	for {
		w.mu.Lock()
		wait := time.Until(w.last.Add(w.interval))
		w.mu.Unlock()
		if wait > 0 {
			time.Sleep(wait)
			continue
		}
		err := w.write()
		if err == nil {
			w.mu.Lock()
			since := w.since
			w.isFull.Store(false)
			w.mu.Unlock()
			slog.Info("database storage takes writes again", "refused_for", time.Since(since).Round(time.Millisecond).String())
			return
		}
		if strings.Contains(err.Error(), "sql: database is closed") {
			return
		}
		w.mu.Lock()
		w.last = time.Now()
		w.mu.Unlock()
	}
}

// write is the probe: one small committed write (an upsert of one
// settings row), on both databases.
func (w *StorageWatch) write() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return w.db.WithContext(ctx).Exec(`INSERT INTO settings (key, value) VALUES (?, ?)
ON CONFLICT (key) DO UPDATE SET value = excluded.value`, storageProbeSetting, time.Now().UTC().Format(time.RFC3339Nano)).Error
}
