package allocator

import (
	"context"
	"errors"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/models"
)

// Release frees value of pool held by owner (docs/pools.md). A value held by
// another owner, or quarantined, is 409 not_owner and nothing changes; a
// value that is already free is a no-op success.
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
			return Errf(CodeInvalid, "value", "%v", err)
		}
		if err := t.purgeExpired(p); err != nil {
			return err
		}
		return t.release(p, v, owner)
	})
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
		return Errf(CodeNotOwner, "value", "%s is quarantined (former owner %s/%s); an admin unquarantines it",
			row.Value, deref(row.FormerOwnerType), deref(row.FormerOwnerID))
	}
	if deref(row.OwnerType) != owner.Type || deref(row.OwnerID) != owner.ID {
		return Errf(CodeNotOwner, "owner_id", "%s is held by %s/%s, not %s", row.Value, deref(row.OwnerType), deref(row.OwnerID), owner)
	}
	if err := t.deleteAllocation(p, &row); err != nil {
		return err
	}
	t.changed(p.Name, "release")
	return t.audit("allocation.release", "allocation", p.Name+"/"+row.Value, allocationOut(p.Name, &row), nil)
}
