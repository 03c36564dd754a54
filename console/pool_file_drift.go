package console

import (
	"context"
	"encoding/json"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/models"
)

// PoolFileDrift returns the drift reported by the last pool file load
// (allocator.PoolFileDriftSetting), for the banner of the dashboard and
// the pools page; nil when no load reported any.
func (c *Console) PoolFileDrift(ctx context.Context) ([]allocator.Drift, error) {
	var rows []models.Setting
	if err := c.read(ctx, func(db *gorm.DB) error {
		return db.Where("key = ?", allocator.PoolFileDriftSetting).Limit(1).Find(&rows).Error
	}); err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, nil
	}
	var d []allocator.Drift
	if err := json.Unmarshal([]byte(rows[0].Value), &d); err != nil {
		return nil, err
	}
	return d, nil
}
