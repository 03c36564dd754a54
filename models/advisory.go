package models

import (
	"strconv"

	"gorm.io/gorm"
)

// PostgreSQL's advisory lock keys belong to the database, not to a schema:
// two ipledger schemas in one database (one per test, or two sites) would
// wait for each other's keys, and a wait for one key in one schema could
// close a cycle with a wait in another. So every advisory lock ipledger
// takes is the schema's: the two-int form (class, hashtext(current_schema())),
// where class says which lock it is. Two processes on one schema take the
// same key; two schemas take different ones (two schema names whose hashes
// collide only share waits).
//
// Within one schema the locks are taken in one order, so no two writers
// wait for each other: the pool rows (in name order), then the address
// families (ipv4 before ipv6, each before any statement that can take the
// reserved lock), then the reserved lock (taken by the triggers of
// migration 29). The migrations' and the feed's locks are taken alone.

// LockClass is the first half of an advisory key: which lock it is.
type LockClass int32

const (
	// LockMigrate serialises migrations (Migrate).
	LockMigrate LockClass = 0x69706c00 + iota // "ipl\0"
	// LockFamilyIPv4 and LockFamilyIPv6 serialise the overlap check of
	// the address families (allocator/pool_overlap.go).
	LockFamilyIPv4
	LockFamilyIPv6
	// LockReserved is the reserved-count lock of the triggers
	// (migration_v29.go, migration_v31.go).
	LockReserved
	// LockFeed serialises the feed's sequencer passes.
	LockFeed
	// LockExtension serialises creating an extension, an object of the
	// whole database (search_index.go): its key is (LockExtension, 0).
	LockExtension
)

// legacyKeys are the one-int keys builds before migration 31 took
// exclusively. A build that knows the scoped keys takes the legacy key
// shared before its scoped one: servers of this build never wait for
// one another on it, and an older server still running during a rolling
// upgrade still excludes them, and they it.
var legacyKeys = map[LockClass]int64{
	LockMigrate:    7243518190,
	LockFamilyIPv4: 7243518191,
	LockFamilyIPv6: 7243518192,
	LockFeed:       0x69706c6564676572, // "ipledger"
}

// schemaKeySQL is the second half of a scoped key. A session whose
// search_path names no existing schema has no current schema: it hashes
// the empty string rather than NULL, which would take no lock at all.
const schemaKeySQL = `hashtext(COALESCE(current_schema(), ''))`

// scopedLockSQL is the SQL call that takes class's key of the current
// schema for the transaction (fn: pg_advisory_xact_lock or
// pg_advisory_xact_lock_shared).
func scopedLockSQL(fn string, c LockClass) string {
	return fn + `(` + strconv.Itoa(int(c)) + `, ` + schemaKeySQL + `)`
}

// LockSchema takes class's advisory lock of the current schema until the
// transaction ends (PostgreSQL; SQLite has one writer at a time and takes
// nothing).
func LockSchema(tx *gorm.DB, c LockClass) error {
	if DialectOf(tx) != Postgres {
		return nil
	}
	if k, ok := legacyKeys[c]; ok {
		// Shared first, then the scoped key: a server of this build never
		// holds its scoped key while it waits for an older server.
		if err := tx.Exec(`SELECT pg_advisory_xact_lock_shared(?)`, k).Error; err != nil {
			return err
		}
	}
	return tx.Exec(`SELECT ` + scopedLockSQL("pg_advisory_xact_lock", c)).Error
}
