package allocator

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

// AllocationFilter selects allocations of one pool.
type AllocationFilter struct {
	OwnerType string
	OwnerID   string
	// State is "", "allocated" or "quarantined".
	State string
	// Value keeps one value, or with an address prefix
	// (10.180.62.0/24) every value inside it: an index range of the
	// pool's (pool, value) key. A malformed one is 422 invalid.
	Value string
	// Limit defaults to 100 and is capped at 1000.
	Limit int
	// Cursor is the next_cursor of the previous page.
	Cursor string
}

// AllocationPage is one keyset page, ordered by value.
type AllocationPage struct {
	Items      []Allocation `json:"items"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

// ListAllocations returns one page of a pool's allocations and quarantines,
// in value order, keyset-paginated so that a page costs the same at any
// depth. An unknown state is 422 invalid.
func (a *Allocator) ListAllocations(ctx context.Context, pool string, f AllocationFilter) (*AllocationPage, error) {
	switch f.State {
	case "", models.StateAllocated, models.StateQuarantined:
	default:
		return nil, fault.Errf(fault.CodeInvalid, "state", "unknown state %q: want allocated or quarantined", f.State)
	}
	if f.OwnerType != "" && !ownerTypeRE.MatchString(f.OwnerType) {
		return nil, fault.Errf(fault.CodeInvalid, "owner_type", "owner_type %q must match ^[a-z][a-z0-9_-]{0,31}$", f.OwnerType)
	}
	if len(f.OwnerID) > 128 {
		return nil, fault.Errf(fault.CodeInvalid, "owner_id", "owner_id is %d characters long; at most 128", len(f.OwnerID))
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	if f.Limit > 1000 {
		f.Limit = 1000
	}
	var p models.Pool
	err := a.read(ctx, func(db *gorm.DB) error { return db.Where("name = ?", pool).Take(&p).Error })
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fault.Errf(fault.CodeNotFound, "", "pool %q does not exist", pool)
	}
	if err != nil {
		return nil, err
	}
	if f.Cursor != "" {
		// A cursor names its pool: a value key alone would be read in
		// another pool's space and silently skip or repeat its rows.
		id, key, ok := strings.Cut(f.Cursor, "-")
		k, err := parseKey(key)
		if !ok || err != nil || id != strconv.FormatInt(p.ID, 10) {
			return nil, fault.Errf(fault.CodeInvalid, "cursor", "cursor %q is not one this API returned for the allocations of pool %q", f.Cursor, pool)
		}
		f.Cursor = k.key() // canonical lower-case: keys compare bytewise
	}
	vFirst, vLast, err := valueKeyRange(spaceOf(&p), f.Value)
	if err != nil {
		return nil, err
	}
	var rows []models.Allocation
	err = a.read(ctx, func(db *gorm.DB) error {
		q := db.Where("pool_id = ?", p.ID)
		if vFirst != "" {
			q = q.Where("value_key >= ? AND value_key <= ?", vFirst, vLast)
		}
		if f.OwnerType != "" {
			q = q.Where("owner_type = ?", f.OwnerType)
		}
		if f.OwnerID != "" {
			q = q.Where("owner_id = ?", f.OwnerID)
		}
		if f.State != "" {
			q = q.Where("state = ?", f.State)
		}
		if a.hold > 0 {
			q = q.Where("(state <> ? OR quarantined_at > ?)", models.StateQuarantined, a.now().Add(-a.hold))
		}
		if f.Cursor != "" {
			q = q.Where("value_key > ?", f.Cursor)
		}
		return q.Order("value_key").Limit(f.Limit + 1).Find(&rows).Error
	})
	if err != nil {
		return nil, err
	}
	page := &AllocationPage{Items: []Allocation{}}
	for i := range rows {
		if i == f.Limit {
			page.NextCursor = strconv.FormatInt(p.ID, 10) + "-" + rows[i-1].ValueKey
			break
		}
		page.Items = append(page.Items, allocationOut(pool, &rows[i]))
	}
	if err := a.read(ctx, func(db *gorm.DB) error { return nameOwners(db, page.Items) }); err != nil {
		return nil, err
	}
	return page, nil
}

// GetAllocation returns the allocation or quarantine of one value, or 404.
func (a *Allocator) GetAllocation(ctx context.Context, pool, value string) (*Allocation, error) {
	var p models.Pool
	err := a.read(ctx, func(db *gorm.DB) error { return db.Where("name = ?", pool).Take(&p).Error })
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fault.Errf(fault.CodeNotFound, "", "pool %q does not exist", pool)
	}
	if err != nil {
		return nil, err
	}
	v, err := spaceOf(&p).parse(value)
	if err != nil {
		return nil, fault.Errf(fault.CodeInvalid, "value", "%v", err)
	}
	var row models.Allocation
	err = a.read(ctx, func(db *gorm.DB) error {
		q := db.Where("pool_id = ? AND value_key = ?", p.ID, v.key())
		if a.hold > 0 {
			q = q.Where("(state <> ? OR quarantined_at > ?)", models.StateQuarantined, a.now().Add(-a.hold))
		}
		return q.Take(&row).Error
	})
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fault.Errf(fault.CodeNotFound, "", "%s is not allocated in pool %q", spaceOf(&p).format(v), pool)
	}
	if err != nil {
		return nil, err
	}
	out := []Allocation{allocationOut(pool, &row)}
	if err := a.read(ctx, func(db *gorm.DB) error { return nameOwners(db, out) }); err != nil {
		return nil, err
	}
	return &out[0], nil
}
