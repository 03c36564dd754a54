package models

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Pool is one resource pool row (docs/pools.md).
type Pool struct {
	ID                int64 `gorm:"primaryKey"`
	Name              string
	Type              string
	DelegatePrefixLen int
	Gateway           string
	Version           int64
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

// PoolRange is one inclusive range of a pool. FirstKey/LastKey are the
// fixed-width hex sort keys; FirstValue/LastValue the canonical text.
type PoolRange struct {
	ID         int64 `gorm:"primaryKey"`
	PoolID     int64
	FirstKey   string
	LastKey    string
	FirstValue string
	LastValue  string
	AutoAssign bool
	Version    int64
	CreatedAt  time.Time
}

// Allocation is one value of a pool held by an owner, or quarantined
// (owner empty, former owner kept). RunEnd is true when the next value of
// the pool is not held: the gap search of automatic allocation walks the
// index of run ends instead of the pool's values.
type Allocation struct {
	ID               int64 `gorm:"primaryKey"`
	PoolID           int64
	ValueKey         string
	Value            string
	State            string
	OwnerType        *string
	OwnerID          *string
	RunEnd           bool
	AllocatedAt      time.Time
	QuarantineReason *string
	FormerOwnerType  *string
	FormerOwnerID    *string
	QuarantinedAt    *time.Time
}

// Allocation states.
const (
	StateAllocated   = "allocated"
	StateQuarantined = "quarantined"
)

// AuditEvent records one change: who, what, and the object before and after
// (JSON, secrets redacted by the writer).
type AuditEvent struct {
	ID    int64 `gorm:"primaryKey"`
	At    time.Time
	Actor string
	// ActorRole is the role the actor acted with (viewer, operator,
	// admin); nil for system actors.
	ActorRole  *string
	Action     string
	ObjectType string
	ObjectID   string
	RequestID  string
	BeforeJSON *string
	AfterJSON  *string
	// Revision is the event's place in commit order, set by the feed's
	// sequencer after the event's transaction committed (NULL until then);
	// writers never set it.
	Revision *int64 `gorm:"->"`
}

// APIToken is a bearer token; only its SHA-256 is stored.
type APIToken struct {
	ID        int64 `gorm:"primaryKey"`
	Name      string
	Role      string
	TokenHash string
	CreatedAt time.Time
}

// Setting is a small key/value row (e.g. the console's session key).
type Setting struct {
	Key   string `gorm:"primaryKey"`
	Value string
}

// ExpectedMachine is a host the site expects to ingest (NICo fields).
// FallbackDpuSerialNumbers and MetadataLabels hold JSON arrays.
type ExpectedMachine struct {
	ID                       string `gorm:"primaryKey"`
	BmcMacAddress            string
	BmcUsername              string
	BmcPassword              string
	ChassisSerialNumber      string
	FallbackDpuSerialNumbers string
	MetadataName             string
	MetadataDescription      string
	MetadataLabels           string
	SkuID                    *string
	Version                  int64
	CreatedAt                time.Time
	UpdatedAt                time.Time
}

// ExpectedDpu is one expected DPU of an ExpectedMachine with its optional
// loopback reservations; *Key columns are the numeric sort keys.
type ExpectedDpu struct {
	ID                int64 `gorm:"primaryKey"`
	ExpectedMachineID string
	Position          int
	SerialNumber      string
	LoopbackIP        *string `gorm:"column:loopback_ip"`
	LoopbackIPKey     *string `gorm:"column:loopback_ip_key"`
	LoopbackIPv6      *string `gorm:"column:loopback_ip_v6"`
	LoopbackIPv6Key   *string `gorm:"column:loopback_ip_v6_key"`
}

// Machine is an ingested host or DPU.
type Machine struct {
	MachineID           string `gorm:"primaryKey"`
	Kind                string
	HostMachineID       *string
	State               string
	BmcMacAddress       *string
	ChassisSerialNumber string
	SerialNumber        *string
	ExpectedMachineID   *string
	Version             int64
	CreatedAt           time.Time
	UpdatedAt           time.Time
	// SortName, BindingV4 and BindingV6 are kept by triggers (migration
	// 23); writers never set them.
	SortName  *string `gorm:"->"`
	BindingV4 *string `gorm:"->;column:binding_v4"`
	BindingV6 *string `gorm:"->;column:binding_v6"`
}

// NetworkConfig is a DPU's ManagedHostNetworkConfig.
type NetworkConfig struct {
	MachineID    string  `gorm:"primaryKey"`
	LoopbackIP   *string `gorm:"column:loopback_ip"`
	LoopbackIPv6 *string `gorm:"column:loopback_ip_v6"`
	Version      int64
	UpdatedAt    time.Time
}

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
// reset connection, server shutting down): the API answers 503.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if IsFailover(err) {
		return true // 25006 included: a server that turned read-only
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		// 57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot connect
		// now, 08xxx connection, 57014 statement cancelled (the request's
		// deadline passed while the query ran).
		return strings.HasPrefix(pg.Code, "57P") || strings.HasPrefix(pg.Code, "08") || pg.Code == "57014"
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
