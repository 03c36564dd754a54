// Package models holds ipledger's schema: the gorm models of its rows, the
// versioned migrations and the constraints, indexes and triggers they
// create (ARCHITECTURE.md). Opening a database, and what concerns it as a
// running thing (backups, error classification), is package database.
// Only the allocator writes pool state through these models.
package models

import "time"

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
	// NamesJSON maps the ids of the machines and the ExpectedMachine the
	// event mentions to the names they had when it was written (a JSON
	// object, allocator/audit_names.go); nil when it mentions none, and on
	// events written before schema version 33.
	NamesJSON *string
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
// FallbackDPUSerialNumbers and MetadataLabels hold JSON arrays.
type ExpectedMachine struct {
	ID                       string `gorm:"primaryKey"`
	BmcMacAddress            string
	BmcUsername              string
	BmcPassword              string
	ChassisSerialNumber      string
	FallbackDPUSerialNumbers string
	MetadataName             string
	MetadataDescription      string
	MetadataLabels           string
	SkuID                    *string
	Version                  int64
	CreatedAt                time.Time
	UpdatedAt                time.Time
}

// ExpectedDPU is one expected DPU of an ExpectedMachine with its optional
// loopback reservations; *Key columns are the numeric sort keys.
type ExpectedDPU struct {
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
