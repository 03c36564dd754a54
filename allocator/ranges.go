package allocator

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/txn"
)

// AddRange grows a pool by one range (admin). Overlap with a stored range is
// 409 conflict; a malformed or reversed range is 422 invalid.
func (a *Allocator) AddRange(ctx context.Context, pool string, spec RangeSpec) (*Range, error) {
	var out Range
	err := a.write(ctx, func(t *tx) error {
		p, err := t.lockPool(pool)
		if err != nil {
			return err
		}
		sp := spaceOf(p)
		pr, err := sp.parseRange(spec, "range")
		if err != nil {
			e, _ := fault.AsError(err)
			e.Field = strings.TrimPrefix(e.Field, "range.")
			return e
		}
		row, err := t.insertRange(p, sp, pr)
		if err != nil {
			return err
		}
		out = rangeOut(sp, row)
		t.changed(pool, "grow")
		return t.audit("pool.range.add", "pool", pool, nil, out)
	})
	if err != nil {
		return nil, err
	}
	a.afterGrowth(ctx, pool)
	return &out, nil
}

// GetRange returns one range of a pool, or 404.
func (a *Allocator) GetRange(ctx context.Context, pool, id string) (*Range, error) {
	p, err := a.GetPool(ctx, pool)
	if err != nil {
		return nil, err
	}
	for _, r := range p.Ranges {
		if r.ID == id {
			return &r, nil
		}
	}
	return nil, fault.Errf(fault.CodeNotFound, "", "pool %q has no range %q", pool, id)
}

func (t *tx) rangeByID(p *models.Pool, id string) (*models.PoolRange, error) {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return nil, fault.Errf(fault.CodeNotFound, "", "pool %q has no range %q", p.Name, id)
	}
	var r models.PoolRange
	err = t.Where("id = ? AND pool_id = ?", n, p.ID).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fault.Errf(fault.CodeNotFound, "", "pool %q has no range %q", p.Name, id)
	}
	return &r, err
}

// maxBlockers bounds the values a range refusal names.
const maxBlockers = 20

// blockers names the allocations, quarantines and declared reservations of
// pool p whose values lie in first..last and, when keep is given, outside
// keep[0]..keep[1]: the lowest maxBlockers values in value order, each
// once with everything that holds it, then how many more there are ("" when
// nothing is in the way).
func (t *tx) blockers(p *models.Pool, first, last string, keep *[2]string) (string, error) {
	type blocker struct {
		value string
		why   []string
	}
	byKey := map[string]*blocker{}
	add := func(key, value, why string) {
		b := byKey[key]
		if b == nil {
			b = &blocker{value: value}
			byKey[key] = b
		}
		b.why = append(b.why, why)
	}
	inRange := func(q *gorm.DB, col string) *gorm.DB {
		q = q.Where(col+" BETWEEN ? AND ?", first, last)
		if keep != nil {
			q = q.Where("NOT ("+col+" BETWEEN ? AND ?)", keep[0], keep[1])
		}
		return q
	}
	allocs := func() *gorm.DB { return inRange(t.Model(&models.Allocation{}).Where("pool_id = ?", p.ID), "value_key") }
	var rows []models.Allocation
	if err := allocs().Order("value_key").Limit(maxBlockers).Find(&rows).Error; err != nil {
		return "", err
	}
	total := int64(len(rows))
	if len(rows) == maxBlockers {
		if err := allocs().Count(&total).Error; err != nil {
			return "", err
		}
	}
	// A machine owner is named as operators know it (DPU serial and host
	// name, host name), not by its machine_id.
	owner := func(typ, id *string) string { return ownerText(t.DB, typ, id) }
	for _, al := range rows {
		if al.State == models.StateQuarantined {
			add(al.ValueKey, al.Value, "quarantined, former owner "+owner(al.FormerOwnerType, al.FormerOwnerID))
		} else {
			add(al.ValueKey, al.Value, "allocated to "+owner(al.OwnerType, al.OwnerID))
		}
	}
	if col := reservationColumn(p.Name); col != "" {
		decls := func() *gorm.DB { return inRange(t.Model(&models.ExpectedDPU{}), col) }
		var dpus []models.ExpectedDPU
		if err := decls().Order(col).Limit(maxBlockers).Find(&dpus).Error; err != nil {
			return "", err
		}
		for _, d := range dpus {
			v, k := deref(d.LoopbackIP), deref(d.LoopbackIPKey)
			if p.Name == PoolLoopbackV6 {
				v, k = deref(d.LoopbackIPv6), deref(d.LoopbackIPv6Key)
			}
			add(k, v, "declared for DPU "+d.SerialNumber)
		}
		// The declared values that no allocation holds are more values in
		// the way; the others are counted with the allocations.
		var free int64
		if err := decls().Where("NOT EXISTS (SELECT 1 FROM allocations a WHERE a.pool_id = ? AND a.value_key = expected_dpus."+col+")", p.ID).
			Count(&free).Error; err != nil {
			return "", err
		}
		total += free
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys) // fixed-width hexadecimal keys: value order
	if len(keys) > maxBlockers {
		keys = keys[:maxBlockers]
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = byKey[k].value + " (" + strings.Join(byKey[k].why, "; ") + ")"
	}
	msg := strings.Join(out, ", ")
	if more := total - int64(len(keys)); more > 0 {
		msg += fmt.Sprintf(" and %d more", more)
	}
	return msg, nil
}

// UpdateRange flips auto_assign or moves a range's bounds (admin), with the
// refusals of docs/pools.md: shrinking may not leave an allocation,
// quarantine or declared reservation outside the range, and flipping
// auto_assign from false to true is refused while any of those lie in the
// range (reservations must stay in explicit ranges, and an explicitly
// requested value must not turn into an automatic one). Refusals are 409
// conflict naming the blocking values.
func (a *Allocator) UpdateRange(ctx context.Context, pool, id string, u RangeUpdate) (*Range, error) {
	var out Range
	grew := false
	err := a.write(ctx, func(t *tx) error {
		p, err := t.lockPool(pool)
		if err != nil {
			return err
		}
		sp := spaceOf(p)
		row, err := t.rangeByID(p, id)
		if err != nil {
			return err
		}
		// An expired quarantine must not block the change (nor trip the
		// database trigger that guards allocations).
		if err := t.purgeExpired(p); err != nil {
			return err
		}
		if u.Version != nil && *u.Version != row.Version {
			return fault.Errf(fault.CodeStaleVersion, "version", "range %s is at version %d, not %d", id, row.Version, *u.Version)
		}
		if err := u.IfMatch.Check("range "+id, row.Version); err != nil {
			return err
		}
		before := rangeOut(sp, row)
		spec := RangeSpec{First: row.FirstValue, Last: row.LastValue, AutoAssign: &row.AutoAssign}
		if u.First != nil {
			spec.First = *u.First
		}
		if u.Last != nil {
			spec.Last = *u.Last
		}
		if u.AutoAssign != nil {
			spec.AutoAssign = u.AutoAssign
		}
		pr, err := sp.parseRange(spec, "range")
		if err != nil {
			e, _ := fault.AsError(err)
			e.Field = strings.TrimPrefix(e.Field, "range.")
			return e
		}
		keep := [2]string{pr.first.key(), pr.last.key()}
		if keep[0] == row.FirstKey && keep[1] == row.LastKey && pr.auto == row.AutoAssign {
			out = before // nothing to change: no new version, no audit event
			return nil
		}
		if b, err := t.blockers(p, row.FirstKey, row.LastKey, &keep); err != nil {
			return err
		} else if b != "" {
			field := "first"
			if pr.first.key() == row.FirstKey {
				field = "last"
			}
			return fault.Errf(fault.CodeConflict, field, "shrinking range %s..%s to %s..%s would leave values outside it: %s",
				row.FirstValue, row.LastValue, sp.format(pr.first), sp.format(pr.last), b)
		}
		if !row.AutoAssign && pr.auto {
			if b, err := t.blockers(p, keep[0], keep[1], nil); err != nil {
				return err
			} else if b != "" {
				return fault.Errf(fault.CodeConflict, "auto_assign", "range %s..%s cannot become auto_assign while it holds explicitly placed values: %s",
					sp.format(pr.first), sp.format(pr.last), b)
			}
		}
		oldF, _ := parseKey(row.FirstKey)
		oldL, _ := parseKey(row.LastKey)
		grew = pr.first.cmp(oldF) < 0 || pr.last.cmp(oldL) > 0 || (pr.auto && !row.AutoAssign)
		var others int64
		if err := t.Model(&models.PoolRange{}).Where("pool_id = ? AND id <> ? AND first_key <= ? AND last_key >= ?",
			p.ID, row.ID, keep[1], keep[0]).Count(&others).Error; err != nil {
			return err
		}
		if others > 0 {
			return fault.Errf(fault.CodeConflict, "first", "range %s..%s would overlap another range of pool %q", sp.format(pr.first), sp.format(pr.last), pool)
		}
		if grew && (pr.first.cmp(oldF) < 0 || pr.last.cmp(oldL) > 0) {
			if err := t.refuseOverlap(p, sp, pr.first, pr.last, row.ID, "first"); err != nil {
				return err
			}
		}
		res := t.Model(&models.PoolRange{}).Where("id = ? AND version = ?", row.ID, row.Version).Updates(map[string]any{
			"first_key": keep[0], "last_key": keep[1], "first_value": sp.format(pr.first), "last_value": sp.format(pr.last),
			"auto_assign": pr.auto, "version": row.Version + 1})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			return fault.Errf(fault.CodeStaleVersion, "version", "range %s changed meanwhile", id)
		}
		if err := t.Where("id = ?", row.ID).Take(row).Error; err != nil {
			return err
		}
		out = rangeOut(sp, row)
		return t.audit("pool.range.update", "pool", pool, before, out)
	})
	if err != nil {
		return nil, err
	}
	if grew {
		a.afterGrowth(ctx, pool)
	}
	return &out, nil
}

// RemoveRange deletes a range that holds no allocation, quarantine or
// declared reservation (admin); otherwise 409 conflict naming them.
func (a *Allocator) RemoveRange(ctx context.Context, pool, id string) error {
	return a.RemoveRangeIf(ctx, pool, id, nil)
}

// RemoveRangeIf is RemoveRange with an If-Match precondition on the range's
// version (412 stale_version when it does not match).
func (a *Allocator) RemoveRangeIf(ctx context.Context, pool, id string, m txn.IfMatch) error {
	return a.write(ctx, func(t *tx) error {
		p, err := t.lockPool(pool)
		if err != nil {
			return err
		}
		row, err := t.rangeByID(p, id)
		if err != nil {
			return err
		}
		if err := m.Check("range "+id, row.Version); err != nil {
			return err
		}
		if err := t.purgeExpired(p); err != nil {
			return err
		}
		if b, err := t.blockers(p, row.FirstKey, row.LastKey, nil); err != nil {
			return err
		} else if b != "" {
			return fault.Errf(fault.CodeConflict, "id", "range %s..%s still holds values: %s", row.FirstValue, row.LastValue, b)
		}
		before := rangeOut(spaceOf(p), row)
		if err := t.Delete(&models.PoolRange{}, row.ID).Error; err != nil {
			return err
		}
		return t.audit("pool.range.remove", "pool", pool, before, nil)
	})
}
