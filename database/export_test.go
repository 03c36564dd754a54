package database

import (
	"time"

	"gorm.io/gorm"
)

// SetStorageProbeInterval shortens the wait of db's storage watch, so a
// test of its recovery does not wait StorageProbeInterval.
func SetStorageProbeInterval(db *gorm.DB, d time.Duration) { StorageWatchOf(db).interval = d }
