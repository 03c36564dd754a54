package allocator

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

var ownerTypeRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// Owner is who holds an allocation (docs/api.md: owner_type
// ^[a-z][a-z0-9_-]{0,31}$, owner_id non-empty, at most 128 characters).
type Owner struct {
	Type string `json:"owner_type"`
	ID   string `json:"owner_id"`
}

func (o Owner) String() string { return o.Type + "/" + o.ID }

// Validate checks the owner's fields (422 invalid naming the field).
func (o Owner) Validate() error {
	if !ownerTypeRE.MatchString(o.Type) {
		return fault.Errf(fault.CodeInvalid, "owner_type", "owner_type %q must match ^[a-z][a-z0-9_-]{0,31}$", o.Type)
	}
	if o.ID == "" || len(o.ID) > 128 {
		return fault.Errf(fault.CodeInvalid, "owner_id", "owner_id must be 1 to 128 characters, got %d", len(o.ID))
	}
	return nil
}

// OwnerTypeMachine is the owner type of DPU loopbacks; the owner id is the
// DPU's machine_id.
const OwnerTypeMachine = "machine"

// Allocation is one allocation or quarantine as the API shows it.
type Allocation struct {
	Pool             string     `json:"pool"`
	Value            string     `json:"value"`
	OwnerType        *string    `json:"owner_type"`
	OwnerID          *string    `json:"owner_id"`
	State            string     `json:"state"`
	AllocatedAt      time.Time  `json:"allocated_at"`
	QuarantineReason *string    `json:"quarantine_reason,omitempty"`
	FormerOwnerType  *string    `json:"former_owner_type,omitempty"`
	FormerOwnerID    *string    `json:"former_owner_id,omitempty"`
	QuarantinedAt    *time.Time `json:"quarantined_at,omitempty"`
	// OwnerName names a machine owner (the former owner of a quarantined
	// value) as the console does: "DPU MT2242X00001 of host rack7-u12",
	// "host rack7-u12", "DPU MT2242X00099 (deleted)". Absent for other
	// owners, and in the answers of writes.
	OwnerName string `json:"owner_name,omitempty"`
}

func allocationOut(pool string, r *models.Allocation) Allocation {
	return Allocation{Pool: pool, Value: r.Value, OwnerType: r.OwnerType, OwnerID: r.OwnerID, State: r.State,
		AllocatedAt: r.AllocatedAt.UTC(), QuarantineReason: r.QuarantineReason, FormerOwnerType: r.FormerOwnerType,
		FormerOwnerID: r.FormerOwnerID, QuarantinedAt: r.QuarantinedAt}
}

// Allocate gives owner a value of pool (docs/pools.md). Idempotent by owner:
// if the owner already holds a value it is returned with created=false (a
// requested value that differs is 409 conflict). With requested set, the
// value must lie in an auto_assign=false range, be free, and not be declared
// for another DPU, else 409 not_available saying why; a malformed value or
// one of the wrong family is 422 invalid. Without it, the lowest free value
// of the auto_assign ranges is taken, or 409 pool_exhausted.
func (a *Allocator) Allocate(ctx context.Context, pool string, owner Owner, requested string) (Allocation, bool, error) {
	if err := owner.Validate(); err != nil {
		return Allocation{}, false, err
	}
	if strings.TrimSpace(requested) == "" && a.path != PathSingle {
		return a.allocateAuto(ctx, pool, owner)
	}
	return a.allocateOne(ctx, pool, owner, requested)
}

// allocateOne is Allocate in a transaction of its own (requested values,
// and automatic allocations whose batch failed).
func (a *Allocator) allocateOne(ctx context.Context, pool string, owner Owner, requested string) (Allocation, bool, error) {
	var (
		out     Allocation
		created bool
	)
	err := a.write(ctx, func(t *tx) error {
		p, err := t.lockPool(pool)
		if err != nil {
			return err
		}
		row, c, err := t.allocate(p, owner, requested)
		if err != nil {
			return err
		}
		out, created = allocationOut(pool, row), c
		return nil
	})
	return out, created, err
}

// allocate is Allocate inside a transaction that holds p's lock.
func (t *tx) allocate(p *models.Pool, owner Owner, requested string) (*models.Allocation, bool, error) {
	sp := spaceOf(p)
	var want *u128
	if strings.TrimSpace(requested) != "" {
		v, err := sp.parse(requested)
		if err != nil {
			return nil, false, fault.Errf(fault.CodeInvalid, "value", "%v", err)
		}
		want = &v
	}
	if want == nil {
		res, err := t.allocateLowestFree(p, []autoOwner{{ctx: t.ctx, owner: owner}}, false)
		if err != nil {
			return nil, false, err
		}
		// A retry finding the value an earlier attempt of this write
		// committed (its answer lost) still reports it as created.
		created := res[0].created || (res[0].err == nil && t.attempt > 0 && res[0].row.AllocatedAt.Equal(t.now))
		return res[0].row, created, res[0].err
	}
	if err := t.purgeExpired(p); err != nil {
		return nil, false, err
	}
	var held models.Allocation
	err := t.Where("pool_id = ? AND owner_type = ? AND owner_id = ?", p.ID, owner.Type, owner.ID).Take(&held).Error
	if err == nil {
		if want.key() != held.ValueKey {
			return nil, false, fault.Errf(fault.CodeConflict, "value", "owner %s already holds %s in pool %q, not %s",
				owner, held.Value, p.Name, sp.format(*want))
		}
		return &held, false, nil
	}
	if !errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, false, err
	}
	reclaim, err := t.checkRequestable(p, *want, owner)
	if err != nil {
		return nil, false, err
	}
	if reclaim != nil {
		row, err := t.reclaimRow(p, reclaim, owner)
		return row, err == nil, err
	}
	row, err := t.insertAllocation(p, *want, owner)
	return row, err == nil, err
}

// checkRequestable applies the requested-value rules. It returns the
// quarantine row when the value is quarantined for this same owner (the
// owner takes its own value back).
func (t *tx) checkRequestable(p *models.Pool, v u128, owner Owner) (*models.Allocation, error) {
	sp := spaceOf(p)
	val := sp.format(v)
	var r models.PoolRange
	err := t.Where("pool_id = ? AND first_key <= ? AND last_key >= ?", p.ID, v.key(), v.key()).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fault.Errf(fault.CodeNotAvailable, "value", "%s is not in pool %q", val, p.Name)
	}
	if err != nil {
		return nil, err
	}
	if r.AutoAssign {
		return nil, fault.Errf(fault.CodeNotAvailable, "value", "%s is in an auto-assign range (%s..%s) of pool %q; only values of auto_assign=false ranges can be requested",
			val, r.FirstValue, r.LastValue, p.Name)
	}
	var row models.Allocation
	err = t.Where("pool_id = ? AND value_key = ?", p.ID, v.key()).Take(&row).Error
	if err == nil {
		if row.State == models.StateQuarantined {
			if deref(row.FormerOwnerType) == owner.Type && deref(row.FormerOwnerID) == owner.ID {
				return &row, nil
			}
			return nil, fault.Errf(fault.CodeNotAvailable, "value", "%s is quarantined (former owner %s)", val, ownerText(t.DB, row.FormerOwnerType, row.FormerOwnerID))
		}
		return nil, fault.Errf(fault.CodeNotAvailable, "value", "%s is allocated to %s", val, ownerText(t.DB, row.OwnerType, row.OwnerID))
	}
	if !errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, err
	}
	if serial, ok, err := t.declaredFor(p, v); err != nil {
		return nil, err
	} else if ok && !(owner.Type == OwnerTypeMachine && owner.ID == DPUMachineID(serial)) {
		return nil, fault.Errf(fault.CodeNotAvailable, "value", "%s is declared for DPU %s", val, serial)
	}
	return nil, nil
}

// declaredFor tells whether an ExpectedDpu declares v (loopback pools only)
// and for which serial.
func (t *tx) declaredFor(p *models.Pool, v u128) (string, bool, error) {
	col := reservationColumn(p.Name)
	if col == "" {
		return "", false, nil
	}
	var d models.ExpectedDPU
	err := t.Where(col+" = ?", v.key()).Take(&d).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return d.SerialNumber, true, nil
}

func (t *tx) taken(p *models.Pool, v u128) (bool, error) {
	var n int64
	err := t.Raw(`SELECT COUNT(*) FROM allocations WHERE pool_id = ? AND value_key = ?`, p.ID, v.key()).Scan(&n).Error
	return n > 0, err
}

// insertAllocation stores a new allocation of v to owner and keeps the run
// ends of the neighbours right.
func (t *tx) insertAllocation(p *models.Pool, v u128, owner Owner) (*models.Allocation, error) {
	sp := spaceOf(p)
	runEnd := true
	if n, ok := sp.next(v); ok {
		nextTaken, err := t.taken(p, n)
		if err != nil {
			return nil, err
		}
		runEnd = !nextTaken
	}
	row := models.Allocation{PoolID: p.ID, ValueKey: v.key(), Value: sp.format(v), State: models.StateAllocated,
		OwnerType: strp(owner.Type), OwnerID: strp(owner.ID), RunEnd: runEnd, AllocatedAt: t.now}
	if err := t.Create(&row).Error; err != nil {
		if database.IsUniqueViolation(err) {
			return nil, fault.Errf(fault.CodeNotAvailable, "value", "%s was taken meanwhile in pool %q", row.Value, p.Name)
		}
		return nil, err
	}
	if pv, ok := sp.prev(v); ok {
		if err := t.Exec(`UPDATE allocations SET run_end = ? WHERE pool_id = ? AND value_key = ?`, false, p.ID, pv.key()).Error; err != nil {
			return nil, err
		}
	}
	t.changed(p.Name, "allocate")
	ev, err := allocationCreateEvent(t.ctx, t.now, p.Name, &row)
	if err != nil {
		return nil, err
	}
	t.record(ev)
	return &row, nil
}

// deleteAllocation removes a row (release, unquarantine, expiry) and marks
// the value before it as a run end.
func (t *tx) deleteAllocation(p *models.Pool, row *models.Allocation) error {
	if err := t.Delete(&models.Allocation{}, row.ID).Error; err != nil {
		return err
	}
	v, err := parseKey(row.ValueKey)
	if err != nil {
		return err
	}
	if pv, ok := spaceOf(p).prev(v); ok {
		return t.Exec(`UPDATE allocations SET run_end = ? WHERE pool_id = ? AND value_key = ?`, true, p.ID, pv.key()).Error
	}
	return nil
}

// reclaimRow turns a quarantine of owner's former value back into owner's
// allocation (same hardware ingested again).
func (t *tx) reclaimRow(p *models.Pool, row *models.Allocation, owner Owner) (*models.Allocation, error) {
	before := quarantineAudit(p.Name, row)
	res := t.Model(&models.Allocation{}).Where("id = ? AND state = ?", row.ID, models.StateQuarantined).Updates(map[string]any{
		"state": models.StateAllocated, "owner_type": owner.Type, "owner_id": owner.ID, "allocated_at": t.now,
		"quarantine_reason": nil, "former_owner_type": nil, "former_owner_id": nil, "quarantined_at": nil})
	if res.Error != nil {
		return nil, res.Error
	}
	if err := t.Where("id = ?", row.ID).Take(row).Error; err != nil {
		return nil, err
	}
	t.changed(p.Name, "allocate")
	if err := t.audit("allocation.reclaim", "allocation", p.Name+"/"+row.Value, before, allocationOut(p.Name, row)); err != nil {
		return nil, err
	}
	return row, nil
}
