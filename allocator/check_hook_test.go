package allocator

import (
	"context"
	"testing"

	"gorm.io/gorm"
)

// CheckDatabase runs the database's consistency check (package dbcheck)
// over db. dbcheck imports the allocator, so these internal tests cannot
// import it: dbcheck_test.go, in the external test package of the same
// test binary, sets it.
var CheckDatabase func(ctx context.Context, db *gorm.DB) (CheckOutcome, error)

// CheckOutcome is what these tests read of the check's result.
type CheckOutcome interface {
	OK() bool
	Failed(rule string) bool
}

// runDBCheck runs the consistency check over db, failing the test when it
// cannot run.
func runDBCheck(t *testing.T, ctx context.Context, db *gorm.DB) CheckOutcome {
	t.Helper()
	if CheckDatabase == nil {
		t.Fatal("the consistency check is not wired in (dbcheck_test.go)")
	}
	res, err := CheckDatabase(ctx, db)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	return res
}
