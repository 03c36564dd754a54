package allocator_test

import (
	"context"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/dbcheck"
)

// The internal tests hold the databases they write to the consistency
// check through allocator.CheckDatabase (check_hook_test.go).
func init() {
	allocator.CheckDatabase = func(ctx context.Context, db *gorm.DB) (allocator.CheckOutcome, error) {
		res, err := dbcheck.Check(ctx, db)
		if err != nil {
			return nil, err
		}
		return res, nil
	}
}
