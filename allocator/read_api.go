package allocator

import (
	"context"
	"net/netip"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/models"
)

// The allocator's read API for the read models outside the package (package
// console): the few derivations a page needs that only the allocator can
// make, each over a handle the caller reads with (txn.Read on DB()).
// Nothing here writes.

// Now is the allocator's clock: the time its writes stamp (UTC, to the
// microsecond; a test's clock under Options.Now).
func (a *Allocator) Now() time.Time { return a.now() }

// QuarantineCutoff is the time at or before which a quarantine has lapsed
// (the value is free again), and false when quarantines never lapse by
// themselves (no hold configured).
func (a *Allocator) QuarantineCutoff() (time.Time, bool) {
	if a.hold <= 0 {
		return time.Time{}, false
	}
	return a.now().Add(-a.hold), true
}

// QuarantineLapsed reports whether a value quarantined at at is free again
// (its hold has passed).
func (a *Allocator) QuarantineLapsed(at *time.Time) bool {
	cut, ok := a.QuarantineCutoff()
	return ok && at != nil && !at.After(cut)
}

// MachinesOf renders machine rows read with db as the API shows them:
// hosts with their DPUs (by serial number), DPUs with their network config.
func (a *Allocator) MachinesOf(ctx context.Context, db *gorm.DB, rows []models.Machine) ([]Machine, error) {
	return a.machinesOut(ctx, db, rows)
}

// BindingsOf computes the bindings of DPU rows read with db, with a fixed
// number of queries per batch.
func BindingsOf(db *gorm.DB, dpus []models.Machine) ([]Binding, error) {
	return bindingsOf(db, dpus)
}

// BindingStatus is the status of one family of a DPU's binding from its
// active and reserved values (docs/api.md).
func BindingStatus(active, reserved *string, poolExists bool) string {
	return bindingStatus(active, reserved, poolExists)
}

// LoopbackPoolsExist tells, read with db, which of lo-ip and lo-ip-v6
// exist.
func LoopbackPoolsExist(db *gorm.DB) (map[string]bool, error) {
	return loopbackPoolsExist(db)
}

// BindingClassStatus is the binding status of a binding class stored on a
// DPU and counted in fleet_counts (migration 23), given whether the
// family's pool exists.
func BindingClassStatus(class string, poolExists bool) string {
	return classStatus(class, poolExists)
}

// BindingClass is the binding class stored for a binding status: the
// statuses of a family without value and reservation (missing, none)
// depend on whether the pool exists, which readers know; they are stored
// as one class.
func BindingClass(status string) string {
	if status == BindingMissing || status == BindingNone {
		return fleetUnbound
	}
	return status
}

// ExpectedDPUBySerial finds the ExpectedDpu of a serial (globally unique)
// with db, or nil.
func ExpectedDPUBySerial(db *gorm.DB, serial string) (*models.ExpectedDPU, error) {
	return expectedDPUBySerial(db, serial)
}

// MachineNamesOf returns the display name of each machine_id given, read
// with db (hosts by the host rule, DPUs by serial); ids that are not
// machines are left out; kinds maps each id found to its kind (host or
// dpu).
func MachineNamesOf(db *gorm.DB, ids []string) (names, kinds map[string]string, err error) {
	return machineNames(db, ids)
}

// IsMachineID reports whether s has the shape of a machine_id.
func IsMachineID(s string) bool { return machineIDRE.MatchString(s) }

// ParseInteger reads a non-negative integer value as integer pools hold
// them: decimal or 0x hex.
func ParseInteger(s string) (uint64, error) {
	u, err := parseInteger(s)
	return u.lo, err
}

// PrefixKeys is the value_key range of the values of pool p inside prefix
// (addresses of an ipv4 or ipv6 pool, block starts of an ipv6prefix pool);
// ok is false when prefix is of another family than the pool.
func PrefixKeys(p *models.Pool, prefix netip.Prefix) (first, last string, ok bool) {
	f, l, ok := prefixKeys(spaceOf(p), prefix)
	if !ok {
		return "", "", false
	}
	return f.key(), l.key(), true
}
