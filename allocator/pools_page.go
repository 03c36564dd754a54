package allocator

import (
	"context"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

// PoolFilter pages the pools by name.
type PoolFilter struct {
	// Limit is the page size (default 100, at most 1000).
	Limit int
	// Cursor is the next_cursor of the previous page: the name of its last
	// pool.
	Cursor string
}

// PoolPage is one page of pools with ranges and stats.
type PoolPage struct {
	Items      []Pool `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// ListPoolsPage returns one page of the pools, by name (keyset: only the
// page's pools are read and counted). A cursor that names no pool is 422.
func (a *Allocator) ListPoolsPage(ctx context.Context, f PoolFilter) (*PoolPage, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	f.Limit = min(f.Limit, 1000)
	var rows []models.Pool
	err := a.read(ctx, func(db *gorm.DB) error {
		if f.Cursor != "" {
			var n int64
			if err := db.Model(&models.Pool{}).Where("name = ?", f.Cursor).Count(&n).Error; err != nil {
				return err
			}
			if n == 0 {
				return fault.Errf(fault.CodeInvalid, "cursor", "cursor %q is not one this API returned", f.Cursor)
			}
			db = db.Where("name > ?", f.Cursor)
		}
		return db.Order("name").Limit(f.Limit + 1).Find(&rows).Error
	})
	if err != nil {
		return nil, err
	}
	page := &PoolPage{Items: make([]Pool, 0, min(len(rows), f.Limit))}
	if len(rows) > f.Limit {
		rows = rows[:f.Limit]
		page.NextCursor = rows[len(rows)-1].Name
	}
	for i := range rows {
		p, err := a.poolOut(ctx, &rows[i])
		if err != nil {
			return nil, err
		}
		page.Items = append(page.Items, *p)
	}
	return page, nil
}
