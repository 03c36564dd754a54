package allocator

import (
	"context"
	"errors"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

// Release frees value of pool held by owner (docs/pools.md). A value held by
// another owner, or quarantined, is 409 not_owner and nothing changes; a
// value that is already free is a no-op success. A loopback that an
// ingested DPU's ManagedHostNetworkConfig carries is never released by
// hand: 409 conflict naming the DPU (its serial and machine_id); it leaves
// only through decommission and delete, or a force delete, which clear the
// network config in the same transaction. The check runs under the pool
// lock, which ingestion also takes before it writes a network config, so a
// report racing the release cannot slip in between.
func (a *Allocator) Release(ctx context.Context, pool, value string, owner Owner) error {
	if err := owner.Validate(); err != nil {
		return err
	}
	return a.write(ctx, func(t *tx) error {
		p, err := t.lockPool(pool)
		if err != nil {
			return err
		}
		v, err := spaceOf(p).parse(value)
		if err != nil {
			return fault.Errf(fault.CodeInvalid, "value", "%v", err)
		}
		if err := t.purgeExpired(p); err != nil {
			return err
		}
		if err := t.refuseLiveLoopback(p, spaceOf(p).format(v)); err != nil {
			return err
		}
		return t.release(p, v, owner)
	})
}

// refuseLiveLoopback answers 409 conflict when value of a loopback pool
// is carried by a DPU's network config.
func (t *tx) refuseLiveLoopback(p *models.Pool, value string) error {
	f, ok := familyOfPool(p.Name)
	if !ok {
		return nil
	}
	var ncs []models.NetworkConfig
	if err := t.Where(f.column+" = ?", value).Limit(1).Find(&ncs).Error; err != nil {
		return err
	}
	if len(ncs) == 0 {
		return nil
	}
	serial := "unknown serial"
	var m models.Machine
	if err := t.Where("machine_id = ?", ncs[0].MachineID).Limit(1).Find(&m).Error; err != nil {
		return err
	}
	if m.SerialNumber != nil {
		serial = *m.SerialNumber
	}
	return fault.Errf(fault.CodeConflict, "value", "%s is the %s loopback of DPU %s (machine_id %s) in its network config: it is released only by decommissioning and deleting the host, or by a force delete",
		value, p.Name, serial, ncs[0].MachineID)
}

func (t *tx) release(p *models.Pool, v u128, owner Owner) error {
	var row models.Allocation
	err := t.Where("pool_id = ? AND value_key = ?", p.ID, v.key()).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if row.State == models.StateQuarantined {
		return fault.Errf(fault.CodeNotOwner, "value", "%s is quarantined (former owner %s/%s); an admin unquarantines it",
			row.Value, deref(row.FormerOwnerType), deref(row.FormerOwnerID))
	}
	if deref(row.OwnerType) != owner.Type || deref(row.OwnerID) != owner.ID {
		return fault.Errf(fault.CodeNotOwner, "owner_id", "%s is held by %s/%s, not %s", row.Value, deref(row.OwnerType), deref(row.OwnerID), owner)
	}
	if err := t.deleteAllocation(p, &row); err != nil {
		return err
	}
	t.changed(p.Name, "release")
	return t.audit("allocation.release", "allocation", p.Name+"/"+row.Value, allocationOut(p.Name, &row), nil)
}
