package allocator

import (
	"context"
	"errors"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

// purgeExpired frees the quarantines of p whose hold has run out, so that
// an expiry takes effect for allocation at once (docs/api.md).
func (t *tx) purgeExpired(p *models.Pool) error {
	if t.a.hold <= 0 {
		return nil
	}
	var rows []models.Allocation
	if err := t.Where("pool_id = ? AND state = ? AND quarantined_at <= ?", p.ID, models.StateQuarantined, t.now.Add(-t.a.hold)).
		Find(&rows).Error; err != nil {
		return err
	}
	for i := range rows {
		if err := t.deleteAllocation(p, &rows[i]); err != nil {
			return err
		}
		if err := t.audit("allocation.quarantine_expired", "allocation", p.Name+"/"+rows[i].Value, quarantineAudit(p.Name, &rows[i]), nil); err != nil {
			return err
		}
	}
	return nil
}

// hasExpired tells whether p holds a quarantine purgeExpired would free.
func (t *tx) hasExpired(p *models.Pool) (bool, error) {
	if t.a.hold <= 0 {
		return false, nil
	}
	var ids []int64
	err := t.Model(&models.Allocation{}).Where("pool_id = ? AND state = ? AND quarantined_at <= ?", p.ID, models.StateQuarantined, t.now.Add(-t.a.hold)).
		Limit(1).Pluck("id", &ids).Error
	return len(ids) > 0, err
}

// quarantinedFor finds a value of p quarantined for owner and still held.
func (t *tx) quarantinedFor(p *models.Pool, owner Owner) (*models.Allocation, error) {
	q := t.Where("pool_id = ? AND state = ? AND former_owner_type = ? AND former_owner_id = ?",
		p.ID, models.StateQuarantined, owner.Type, owner.ID)
	if t.a.hold > 0 {
		q = q.Where("quarantined_at > ?", t.now.Add(-t.a.hold))
	}
	var row models.Allocation
	err := q.Order("quarantined_at DESC").Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	return &row, err
}

// quarantine takes row away from its owner and holds it (force delete).
func (t *tx) quarantine(p *models.Pool, row *models.Allocation, reason string) error {
	before := allocationOut(p.Name, row)
	res := t.Model(&models.Allocation{}).Where("id = ? AND state = ?", row.ID, models.StateAllocated).Updates(map[string]any{
		"state": models.StateQuarantined, "owner_type": nil, "owner_id": nil, "quarantine_reason": reason,
		"former_owner_type": deref(row.OwnerType), "former_owner_id": deref(row.OwnerID), "quarantined_at": t.now})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected != 1 {
		return fault.Errf(fault.CodeConflict, "", "%s of pool %q changed meanwhile", row.Value, p.Name)
	}
	if err := t.Where("id = ?", row.ID).Take(row).Error; err != nil {
		return err
	}
	t.changed(p.Name, "quarantine")
	return t.audit("allocation.quarantine", "allocation", p.Name+"/"+row.Value, before, quarantineAudit(p.Name, row))
}

func quarantineAudit(pool string, r *models.Allocation) Allocation { return allocationOut(pool, r) }

// Unquarantine returns a quarantined value to free (admin). A value that is
// not quarantined is 404 not_found (free) or 409 conflict (allocated).
func (a *Allocator) Unquarantine(ctx context.Context, pool, value string) error {
	return a.write(ctx, func(t *tx) error {
		p, err := t.lockPool(pool)
		if err != nil {
			return err
		}
		v, err := spaceOf(p).parse(value)
		if err != nil {
			return fault.Errf(fault.CodeInvalid, "value", "%v", err)
		}
		var row models.Allocation
		err = t.Where("pool_id = ? AND value_key = ?", p.ID, v.key()).Take(&row).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return fault.Errf(fault.CodeNotFound, "", "%s is not quarantined in pool %q", spaceOf(p).format(v), pool)
		}
		if err != nil {
			return err
		}
		if row.State != models.StateQuarantined {
			return fault.Errf(fault.CodeConflict, "value", "%s is allocated to %s, not quarantined", row.Value, ownerText(t.DB, row.OwnerType, row.OwnerID))
		}
		if err := t.deleteAllocation(p, &row); err != nil {
			return err
		}
		t.changed(pool, "unquarantine")
		return t.audit("allocation.unquarantine", "allocation", pool+"/"+row.Value, quarantineAudit(pool, &row), nil)
	})
}
