package database_test

import (
	"database/sql"
	"fmt"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

// TestClosedDatabaseIsUnavailable: a read or a transaction on a database
// handle that was closed (as at shutdown, while a request was still
// running) is classified unavailable (503 with a retry), not an internal
// error, on both databases; so is database/sql's ErrConnDone.
func TestClosedDatabaseIsUnavailable(t *testing.T) {
	t.Parallel()
	if !database.IsUnavailable(fmt.Errorf("commit: %w", sql.ErrConnDone)) {
		t.Error("sql.ErrConnDone is not unavailable")
	}
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		s, err := db.DB()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		var n int64
		if err := db.Model(&models.Pool{}).Count(&n).Error; !database.IsUnavailable(err) {
			t.Errorf("a read on a closed database: %v, not unavailable", err)
		}
		err = db.Transaction(func(tx *gorm.DB) error { return tx.Exec("SELECT 1").Error })
		if err == nil || !database.IsUnavailable(err) {
			t.Errorf("a transaction on a closed database: %v, not unavailable", err)
		}
	})
}
