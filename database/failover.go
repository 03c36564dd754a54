package database

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// IsFailover reports an error a PostgreSQL failover causes: the server
// shut down or is shutting down (57P01 admin shutdown, 57P02 crash
// shutdown, 57P03 cannot connect now), it is a standby or a demoted
// primary that refuses writes (25006 read-only transaction), the
// connection failed (08xxx) or was lost (reset, EOF, refused). A
// transaction that met one before its COMMIT was sent did not happen, and
// may run again on a fresh connection, which a multi-host URL with
// target_session_attrs=read-write points at the new primary. A cancelled
// statement (57014, the request's deadline) is not one: the caller left.
func IsFailover(err error) bool {
	if err == nil {
		return false
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch pg.Code {
		case "57P01", "57P02", "57P03", "25006":
			return true
		}
		return strings.HasPrefix(pg.Code, "08")
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && !ne.Timeout() {
		return true
	}
	m := err.Error()
	for _, s := range []string{"connection refused", "broken pipe", "connection reset", "failed to connect",
		"conn closed", "unexpected EOF", "server closed the connection", "the database system is"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}
