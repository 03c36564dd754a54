package allocator

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/txn"
)

// loopbackPools are the two pools reservations refer to, as locked (or
// read) by the validating transaction, with their ranges.
type loopbackPools struct {
	v4, v6             *models.Pool
	v4Ranges, v6Ranges []models.PoolRange
}

// of returns the pool of family f and its ranges (nil when it does not
// exist).
func (lp *loopbackPools) of(f loopbackFamily) (*models.Pool, []models.PoolRange) {
	if f.name == FamilyIPv4 {
		return lp.v4, lp.v4Ranges
	}
	return lp.v6, lp.v6Ranges
}

func (t *tx) loopbackPools() (*loopbackPools, error) {
	m, err := t.lockPools(PoolLoopbackV4, PoolLoopbackV6)
	if err != nil {
		return nil, err
	}
	lp := &loopbackPools{v4: m[PoolLoopbackV4], v6: m[PoolLoopbackV6]}
	for _, x := range []struct {
		p  *models.Pool
		rs *[]models.PoolRange
	}{{lp.v4, &lp.v4Ranges}, {lp.v6, &lp.v6Ranges}} {
		if x.p == nil {
			continue
		}
		if err := t.Where("pool_id = ?", x.p.ID).Order("first_key").Find(x.rs).Error; err != nil {
			return nil, err
		}
	}
	return lp, nil
}

// checkMember applies the pool half of docs/reservations.md rule 3: the value lies
// in an auto_assign=false range of its family's pool, which must exist.
// These are 422 invalid (outside the pool, auto-assign range).
func checkMember(p *models.Pool, ranges []models.PoolRange, want PoolType, poolName, field string, a netip.Addr, ps *problems) bool {
	if p == nil {
		ps.add(fault.Errf(fault.CodeInvalid, field, "%s cannot be reserved: pool %q does not exist (define it before reserving %s loopbacks)", a, poolName, want))
		return false
	}
	if PoolType(p.Type) != want {
		ps.add(fault.Errf(fault.CodeInvalid, field, "%s cannot be reserved: pool %q is of type %s, not %s", a, poolName, p.Type, want))
		return false
	}
	k := fromAddr(a).key()
	for _, r := range ranges {
		if r.FirstKey <= k && k <= r.LastKey {
			if r.AutoAssign {
				ps.add(fault.Errf(fault.CodeInvalid, field, "%s is in an auto-assign range (%s..%s) of pool %q; a reservation must lie in an auto_assign=false range",
					a, r.FirstValue, r.LastValue, poolName))
				return false
			}
			return true
		}
	}
	ps.add(fault.Errf(fault.CodeInvalid, field, "%s is not in pool %q; %s", a, poolName, explicitRanges(ranges)))
	return false
}

// explicitRanges says where a reservation may lie: the pool's
// auto_assign=false ranges, so an operator who typed a value outside the
// pool sees which values would be accepted.
func explicitRanges(ranges []models.PoolRange) string {
	var rs []string
	for _, r := range ranges {
		if !r.AutoAssign {
			rs = append(rs, r.FirstValue+".."+r.LastValue)
		}
	}
	switch len(rs) {
	case 0:
		return "it has no explicit (auto_assign=false) range to reserve from: add one first"
	case 1:
		return "reservations lie in its explicit range " + rs[0]
	}
	return "reservations lie in its explicit ranges " + strings.Join(rs, ", ")
}

// validateRecords is THE validation of ExpectedMachines (docs/reservations.md),
// used by every write and by ValidateExpectedMachine. recs are the
// records the request writes (already normalized, syntax problems in ps);
// replaced are the ids of stored records whose DPU rows the request
// replaces or removes (their stored declarations do not collide); all is
// true for replace-all, where every stored record is replaced. Problems
// come in three passes so that a request is reported malformed (422)
// before it is reported colliding (409): syntax (normalize), pool
// membership, then collisions with stored state.
func (t *tx) validateRecords(recs []*emRecord, replaced map[string]bool, all bool, ps *problems) error {
	lp, err := t.loopbackPools()
	if err != nil {
		return err
	}
	// Pass 2: duplicates across records (replace-all) and pool membership.
	macs := map[string]string{}
	serials := map[string]string{}
	declared := [2]map[netip.Addr]string{{}, {}} // per family: value → the DPU field declaring it
	v4s, v6s := declared[0], declared[1]
	for _, r := range recs {
		if r.mac != "" && len(recs) > 1 {
			if other, dup := macs[r.mac]; dup {
				ps.add(fault.Errf(fault.CodeInvalid, r.f("bmc_mac_address"), "bmc_mac_address %s is already used by %s", r.mac, other))
			} else {
				macs[r.mac] = r.prefix
			}
		}
		for i := range r.dpus {
			d := &r.dpus[i]
			if d.kept {
				continue
			}
			if d.serial != "" {
				if other, dup := serials[serialKey(d.serial)]; dup && len(recs) > 1 {
					ps.add(fault.Errf(fault.CodeInvalid, d.field+".serial_number", "serial_number %s is already used by %s", d.serial, other))
				} else if !dup {
					serials[serialKey(d.serial)] = d.field
				}
			}
			for j, f := range loopbackFamilies {
				a := d.addr(f)
				if !a.IsValid() {
					continue
				}
				p, ranges := lp.of(f)
				if other, dup := declared[j][*a]; dup && len(recs) > 1 {
					ps.add(fault.Errf(fault.CodeInvalid, d.field+"."+f.column, "%s is already reserved by %s", *a, other))
					*a = netip.Addr{}
				} else if !checkMember(p, ranges, f.typ, f.pool, d.field+"."+f.column, *a, ps) {
					*a = netip.Addr{}
				} else {
					declared[j][*a] = d.field
				}
			}
		}
	}
	if len(*ps) > 0 && !t.everyProblem {
		return nil
	}
	// Pass 3: collisions with stored state (409), field order. The
	// allocations and quarantines of every requested value are read at
	// once (a replace-all of thousands of records stays a few queries).
	held, err := t.heldValues(lp, recs)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if !all && r.mac != "" {
			var other models.ExpectedMachine
			q := t.Where("bmc_mac_address = ?", r.mac)
			if r.selfID != "" {
				q = q.Where("id <> ?", r.selfID)
			}
			err := q.Take(&other).Error
			if err == nil {
				ps.add(fault.Errf(fault.CodeConflict, r.f("bmc_mac_address"), "bmc_mac_address %s is already used by ExpectedMachine %s", r.mac, emLabelOf(&other)))
			} else if !errors.Is(err, gorm.ErrRecordNotFound) {
				return err
			}
		}
		for _, d := range r.dpus {
			if d.kept {
				continue
			}
			if err := t.checkDPUCollisions(d, lp, held, replaced, all, ps); err != nil {
				return err
			}
		}
	}
	// Kept DPUs of replace-all records are part of the final state: a
	// DPU written by the file may not collide with them.
	for _, r := range recs {
		for _, d := range r.dpus {
			if !d.kept {
				continue
			}
			owner := fmt.Sprintf("%s (kept: %s leaves expected_dpus out)", r.mac, r.prefix)
			if f, dup := serials[serialKey(d.serial)]; dup {
				ps.add(fault.Errf(fault.CodeConflict, f+".serial_number", "serial_number %s is declared by ExpectedMachine %s", d.serial, owner))
			}
			if f, dup := v4s[d.v4]; d.v4.IsValid() && dup {
				ps.add(fault.Errf(fault.CodeNotAvailable, f+".loopback_ip", "%s is declared for DPU %s of ExpectedMachine %s", d.v4, d.serial, owner))
			}
			if f, dup := v6s[d.v6]; d.v6.IsValid() && dup {
				ps.add(fault.Errf(fault.CodeNotAvailable, f+".loopback_ip_v6", "%s is declared for DPU %s of ExpectedMachine %s", d.v6, d.serial, owner))
			}
		}
	}
	return nil
}

// checkDPUCollisions applies the stored-state half of docs/reservations.md rules 1
// and 3 to one DPU: serial declared by another ExpectedMachine (409
// conflict); value declared by another ExpectedDpu, allocated to an owner
// other than this serial's DPU, or quarantined for another machine (409
// not_available).
func (t *tx) checkDPUCollisions(d emDPU, lp *loopbackPools, held map[string]*models.Allocation, replaced map[string]bool, all bool, ps *problems) error {
	other := func(col, val string) (*models.ExpectedDPU, error) {
		if all {
			return nil, nil
		}
		var rows []models.ExpectedDPU
		if err := t.Where(col+" = ?", val).Find(&rows).Error; err != nil {
			return nil, err
		}
		for i := range rows {
			if !replaced[rows[i].ExpectedMachineID] {
				return &rows[i], nil
			}
		}
		return nil, nil
	}
	if d.serial != "" {
		o, err := other("lower(serial_number)", serialKey(d.serial))
		if err != nil {
			return err
		}
		switch {
		case o == nil:
		case o.SerialNumber != d.serial:
			ps.add(fault.Errf(fault.CodeConflict, d.field+".serial_number", "serial_number %s is already declared as %s by ExpectedMachine %s (a serial number names one DPU in any case)",
				d.serial, o.SerialNumber, t.emLabel(o.ExpectedMachineID)))
		default:
			ps.add(fault.Errf(fault.CodeConflict, d.field+".serial_number", "serial_number %s is already declared by ExpectedMachine %s", d.serial, t.emLabel(o.ExpectedMachineID)))
		}
	}
	owner := Owner{Type: OwnerTypeMachine, ID: DPUMachineID(d.serial)}
	for _, fam := range []struct {
		a     netip.Addr
		p     *models.Pool
		col   string
		field string
	}{{d.v4, lp.v4, "loopback_ip_key", d.field + ".loopback_ip"}, {d.v6, lp.v6, "loopback_ip_v6_key", d.field + ".loopback_ip_v6"}} {
		if !fam.a.IsValid() || fam.p == nil {
			continue
		}
		k := fromAddr(fam.a).key()
		o, err := other(fam.col, k)
		if err != nil {
			return err
		}
		if o != nil {
			ps.add(fault.Errf(fault.CodeNotAvailable, fam.field, "%s is declared for DPU %s of ExpectedMachine %s", fam.a, o.SerialNumber, t.emLabel(o.ExpectedMachineID)))
			continue
		}
		al := held[heldKey(fam.p.ID, k)]
		if al == nil {
			continue
		}
		if al.State == models.StateQuarantined {
			if t.a.hold > 0 && al.QuarantinedAt != nil && !al.QuarantinedAt.After(t.now.Add(-t.a.hold)) {
				continue // the hold ran out: the value is free
			}
			if d.serial != "" && (deref(al.FormerOwnerType) != owner.Type || deref(al.FormerOwnerID) != owner.ID) {
				ps.add(fault.Errf(fault.CodeNotAvailable, fam.field, "%s is quarantined for another machine (former owner %s)", fam.a, ownerText(t.DB, al.FormerOwnerType, al.FormerOwnerID)))
			}
			continue
		}
		if d.serial == "" {
			continue // a malformed serial names no DPU to compare the owner with
		}
		if deref(al.OwnerType) != owner.Type || deref(al.OwnerID) != owner.ID {
			ps.add(fault.Errf(fault.CodeNotAvailable, fam.field, "%s is allocated to %s, not to DPU %s", fam.a, ownerText(t.DB, al.OwnerType, al.OwnerID), d.serial))
		}
	}
	return nil
}

// serialKey is what makes two DPU serial numbers one: their lower-case
// spelling, as the unique index of migration 32 compares them (serials
// are ASCII, which both databases' lower() folds alike).
func serialKey(serial string) string { return strings.ToLower(serial) }

func heldKey(poolID int64, key string) string { return fmt.Sprintf("%d/%s", poolID, key) }

// heldValues reads the allocation rows (allocated or quarantined) of the
// values the records reserve, keyed by heldKey.
func (t *tx) heldValues(lp *loopbackPools, recs []*emRecord) (map[string]*models.Allocation, error) {
	out := map[string]*models.Allocation{}
	keys := map[int64][]string{}
	for _, r := range recs {
		for _, d := range r.dpus {
			if d.kept {
				continue
			}
			if d.v4.IsValid() && lp.v4 != nil {
				keys[lp.v4.ID] = append(keys[lp.v4.ID], fromAddr(d.v4).key())
			}
			if d.v6.IsValid() && lp.v6 != nil {
				keys[lp.v6.ID] = append(keys[lp.v6.ID], fromAddr(d.v6).key())
			}
		}
	}
	for pid, ks := range keys {
		for start := 0; start < len(ks); start += 500 {
			end := min(start+500, len(ks))
			var rows []models.Allocation
			if err := t.Where("pool_id = ? AND value_key IN ?", pid, ks[start:end]).Find(&rows).Error; err != nil {
				return nil, err
			}
			for i := range rows {
				out[heldKey(pid, rows[i].ValueKey)] = &rows[i]
			}
		}
	}
	return out, nil
}

// emLabel names a stored ExpectedMachine for messages the way the console
// does (names.go): "rack7-u12 (1a:1b:1c:1d:1e:1f)", or its BMC MAC alone
// when it has no name.
func (t *tx) emLabel(id string) string {
	var em models.ExpectedMachine
	if err := t.Where("id = ?", id).Take(&em).Error; err != nil {
		return id
	}
	return emLabelOf(&em)
}

func emLabelOf(em *models.ExpectedMachine) string {
	if n := ExpectedMachineName(em.MetadataName, em.BmcMacAddress); n != em.BmcMacAddress {
		return n + " (" + em.BmcMacAddress + ")"
	}
	return em.BmcMacAddress
}

// ValidateExpectedMachine checks one ExpectedMachine without writing it and
// returns the first problem as an *Error with its field (nil when the
// record would be accepted now). id is the stored record the spec would
// replace ("" for a new one). The rules are the ones every write applies
// (docs/reservations.md): the console uses it for as-you-type validation.
func (a *Allocator) ValidateExpectedMachine(ctx context.Context, id string, spec ExpectedMachineSpec) error {
	ps, err := a.ExpectedMachineProblems(ctx, id, spec)
	if err != nil {
		return err
	}
	if len(ps) == 0 {
		return nil
	}
	return ps[0]
}

// ExpectedMachineProblems is ValidateExpectedMachine returning every
// problem found in one pass, 422 problems before 409 ones, so that a form
// can show each one beside its field: the collisions of the well-formed
// parts of a record are found even when other parts are malformed.
func (a *Allocator) ExpectedMachineProblems(ctx context.Context, id string, spec ExpectedMachineSpec) ([]*fault.Error, error) {
	var ps problems
	t := &tx{DB: a.db.WithContext(ctx), a: a, ctx: ctx, now: a.now(), locked: map[string]*models.Pool{}, everyProblem: true}
	r := normalize("", spec, &ps)
	replaced := map[string]bool{}
	if id != "" {
		cur, err := findExpectedMachine(t.DB, id)
		if err != nil {
			return nil, txn.MapDBError(err)
		}
		r.selfID = cur.ID
		replaced[cur.ID] = r.dpusGiven
	}
	if err := t.validateRecords([]*emRecord{r}, replaced, false, &ps); err != nil {
		return nil, txn.MapDBError(err)
	}
	return ps, nil
}
