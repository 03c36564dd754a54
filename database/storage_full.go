package database

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// IsStorageFull reports an error that says the database's storage cannot
// take a write: the disk (or the file system's quota) is full, or writing
// to it failed. It is unavailability, not a bug of the request: nothing
// was written, and the same write succeeds once space is freed
// (docs/operations.md "A full disk").
//
//   - PostgreSQL: 53100 disk_full ("could not extend file … No space left
//     on device"), 58030 io_error (a read or write the file system
//     refused). The rest of class 53 (out of memory, too many
//     connections) is unavailability too, but passes by itself and says
//     nothing about storage: IsUnavailable holds it.
//   - SQLite: SQLITE_FULL (13: the disk is full, ENOSPC), and the I/O
//     errors that a full disk, a quota (EDQUOT) or a file size limit
//     (EFBIG) give when SQLite writes, syncs, extends or truncates a file
//     or grows its shared-memory index (SQLITE_IOERR_WRITE,
//     SQLITE_IOERR_FSYNC, SQLITE_IOERR_DIR_FSYNC,
//     SQLITE_IOERR_TRUNCATE, SQLITE_IOERR_SHMSIZE): SQLite reports
//     ENOSPC as SQLITE_FULL only on a plain write.
func IsStorageFull(err error) bool {
	if err == nil {
		return false
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code == "53100" || pg.Code == "58030"
	}
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		if _, ok := sqliteStorageCodes[coded.Code()]; ok {
			return true
		}
	}
	return strings.Contains(err.Error(), "database or disk is full")
}

// sqliteStorageCodes are the (extended) SQLite result codes IsStorageFull
// counts, by name.
var sqliteStorageCodes = map[int]string{
	13:   "SQLITE_FULL",
	778:  "SQLITE_IOERR_WRITE",
	1034: "SQLITE_IOERR_FSYNC",
	1290: "SQLITE_IOERR_DIR_FSYNC",
	1546: "SQLITE_IOERR_TRUNCATE",
	4874: "SQLITE_IOERR_SHMSIZE",
}
