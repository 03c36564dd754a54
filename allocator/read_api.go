package allocator

import (
	"net/netip"
	"time"

	"github.com/ipledger/ipledger/models"
)

// The allocator's read API for the read models outside the package (package
// console): the few derivations a page needs that only the allocator can
// make. The reads a page shares with the rules (MachinesOf, BindingsOf,
// BindingStatus, BindingClassStatus, LoopbackPoolsExist,
// ExpectedDPUBySerial, MachineNamesOf) are exported where they are
// written, each over a handle the caller reads with (txn.Read). Nothing
// here writes.

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
