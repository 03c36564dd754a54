package database

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// The classification of database errors, on either database: what the
// write loop retries, what the API maps to 409 or 503.

// IsUniqueViolation reports a unique or exclusion constraint violation on
// either database.
func IsUniqueViolation(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code == "23505" || pg.Code == "23P01"
	}
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

// IsConstraintViolation reports any integrity violation (unique, check,
// foreign key, exclusion, or a rule trigger).
func IsConstraintViolation(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return strings.HasPrefix(pg.Code, "23")
	}
	if err == nil {
		return false
	}
	m := err.Error()
	return strings.Contains(m, "constraint failed") || strings.Contains(m, "range_overlap") ||
		strings.Contains(m, "value_outside_pool") || strings.Contains(m, "range_in_use") ||
		strings.Contains(m, "pool_overlap") || strings.Contains(m, "token_name_taken") ||
		strings.Contains(m, "invisible_character")
}

// IsRetryable reports a transaction that lost a race inside the database
// (deadlock, serialization failure, SQLite busy) and may simply be retried.
func IsRetryable(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code == "40001" || pg.Code == "40P01"
	}
	if err == nil {
		return false
	}
	m := err.Error()
	return strings.Contains(m, "SQLITE_BUSY") || strings.Contains(m, "database is locked")
}

// IsUnavailable reports that the database cannot be reached (refused or
// reset connection, server shutting down), lacks the resources to run the
// statement, or cannot store a write (IsStorageFull): the API answers 503.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if IsFailover(err) || IsStorageFull(err) {
		return true // 25006 included: a server that turned read-only
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		// 57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot connect
		// now, 08xxx connection, 57014 statement cancelled (the request's
		// deadline passed while the query ran), 53xxx insufficient
		// resources (out of memory, too many connections, disk full).
		return strings.HasPrefix(pg.Code, "57P") || strings.HasPrefix(pg.Code, "08") || pg.Code == "57014" ||
			strings.HasPrefix(pg.Code, "53")
	}
	// A connection that broke mid-transaction (the driver closes it when a
	// request's deadline cancels a query, or the server went away): the
	// change did not happen and a retry may succeed.
	if errors.Is(err, driver.ErrBadConn) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	if errors.Is(err, sql.ErrConnDone) {
		return true
	}
	m := err.Error()
	for _, s := range []string{
		// database/sql's own "database is closed" (unexported, so matched
		// by text): the pool was closed under the request, as at shutdown.
		"sql: database is closed",
		"connection refused", "broken pipe", "connection reset", "failed to connect",
		"conn closed", "unexpected EOF", "server closed the connection", "the database system is",
		// SQLite: a statement interrupted because the request's deadline passed.
		"interrupted (9)", "SQLITE_INTERRUPT"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}
