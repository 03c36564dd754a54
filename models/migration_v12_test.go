package models_test

import (
	"fmt"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

// v6key is the sort key of an IPv6 address given as its two 64-bit halves.
func v6key(hi, lo uint64) string { return fmt.Sprintf("%016x%016x", hi, lo) }

func mkPool(t *testing.T, db *gorm.DB, name, typ string, plen int) models.Pool {
	t.Helper()
	p := models.Pool{Name: name, Type: typ, DelegatePrefixLen: plen, Version: 1, CreatedAt: t0, UpdatedAt: t0}
	must(t, db.Create(&p).Error)
	return p
}

func insertRange(db *gorm.DB, pool int64, first, last string) error {
	return db.Create(&models.PoolRange{PoolID: pool, FirstKey: first, LastKey: last, FirstValue: first, LastValue: last, Version: 1, CreatedAt: t0}).Error
}

func wantViolation(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: accepted, want a constraint violation", what)
	}
	if !database.IsConstraintViolation(err) {
		t.Fatalf("%s: error %v is not recognised as a constraint violation", what, err)
	}
}

// Overlapping ranges of two address pools of one family, written directly
// in SQL around the allocator, are refused on both databases; integer pools
// and pools of different families may overlap; touching ranges do not
// overlap; an ipv6prefix block counts every address it covers.
func TestAddressPoolsNeverOverlapInSQL(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		a := mkPool(t, db, "a", "ipv4", 0)
		b := mkPool(t, db, "b", "ipv4", 0)
		must(t, insertRange(db, a.ID, key(100), key(200)))
		wantViolation(t, "ipv4 overlap", insertRange(db, b.ID, key(200), key(300)))
		wantViolation(t, "ipv4 inside", insertRange(db, b.ID, key(150), key(160)))
		must(t, insertRange(db, b.ID, key(201), key(300))) // touching
		// Growing b's range over a's is refused as well.
		wantViolation(t, "ipv4 grow", db.Model(&models.PoolRange{}).Where("pool_id = ?", b.ID).Update("first_key", key(199)).Error)

		// ipv6 pool: the addresses fd00::/64 low half; an ipv6prefix pool
		// of /96 blocks whose last block starts below the ipv6 range but
		// covers part of it.
		v6 := mkPool(t, db, "v6", "ipv6", 0)
		must(t, insertRange(db, v6.ID, v6key(0xfd00<<48, 0x1_0000_0000), v6key(0xfd00<<48, 0x1_ffff_ffff)))
		blocks := mkPool(t, db, "blocks", "ipv6prefix", 96)
		wantViolation(t, "block cover", insertRange(db, blocks.ID, v6key(0xfd00<<48, 0), v6key(0xfd00<<48, 0x1_0000_0000)))
		must(t, insertRange(db, blocks.ID, v6key(0xfd00<<48, 0), v6key(0xfd00<<48, 0))) // covers ::0–::ffff:ffff only
		// An ipv4 pool does not collide with ipv6 values of equal keys.
		must(t, insertRange(db, mkPool(t, db, "c", "ipv4", 0).ID, v6key(0, 0x1_0000_0000), v6key(0, 0x1_0000_0001)))
		// Integer pools are namespaces of their own.
		must(t, insertRange(db, mkPool(t, db, "vlan", "integer", 0).ID, key(100), key(200)))
		must(t, insertRange(db, mkPool(t, db, "vni", "integer", 0).ID, key(100), key(200)))
	})
}

// On PostgreSQL two transactions that bypass the allocator and each insert
// one of two overlapping ranges of different pools cannot both commit: the
// exclusion constraint makes the second wait for the first and fail.
func TestAddressPoolOverlapConcurrentInSQL(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, models.Postgres)
	a := mkPool(t, db, "a", "ipv4", 0)
	b := mkPool(t, db, "b", "ipv4", 0)
	s, _ := db.DB()
	tx1, err := s.Begin()
	must(t, err)
	tx2, err := s.Begin()
	must(t, err)
	ins := `INSERT INTO pool_ranges (pool_id, first_key, last_key, first_value, last_value, auto_assign, created_at) VALUES ($1, $2, $3, 'x', 'y', true, now())`
	_, err = tx1.Exec(ins, a.ID, key(10), key(20))
	must(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := tx2.Exec(ins, b.ID, key(15), key(25))
		if err == nil {
			err = tx2.Commit()
		} else {
			_ = tx2.Rollback()
		}
		done <- err
	}()
	time.Sleep(200 * time.Millisecond) // tx2 waits on the constraint
	must(t, tx1.Commit())
	wantViolation(t, "concurrent overlap", <-done)
	var n int64
	must(t, db.Model(&models.PoolRange{}).Count(&n).Error)
	if n != 1 {
		t.Fatalf("%d ranges stored, want 1", n)
	}
}

// A database that already holds overlapping address pools and tokens
// sharing a name migrates: nothing is dropped, the overlaps are kept (and
// may shrink) but never grow, new overlaps are refused, and the
// duplicates are listed; a new token cannot take a name in use.
func TestMigration12KeepsExistingOverlapsAndDuplicates(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			db := openAt(t, d, 11)
			a := mkPool(t, db, "a", "ipv4", 0)
			b := mkPool(t, db, "b", "ipv4", 0)
			must(t, insertRange(db, a.ID, key(100), key(200)))
			must(t, insertRange(db, b.ID, key(150), key(250)))
			for i, name := range []string{"ci", "ci", "ops", "ci"} {
				must(t, db.Create(&models.APIToken{Name: name, Role: "viewer", TokenHash: fmt.Sprint("h", i), CreatedAt: t0}).Error)
			}

			must(t, models.Migrate(db))

			var n int64
			must(t, db.Model(&models.PoolRange{}).Count(&n).Error)
			must(t, db.Model(&models.APIToken{}).Where("name = 'ci'").Count(&n).Error)
			if n != 3 {
				t.Fatalf("%d tokens named ci after migrating, want 3", n)
			}
			wantViolation(t, "new overlap with a kept one", insertRange(db, mkPool(t, db, "c", "ipv4", 0).ID, key(240), key(260)))
			wantViolation(t, "growing a kept overlap", db.Exec(`UPDATE pool_ranges SET last_key = ? WHERE pool_id = ?`, key(300), b.ID).Error)
			must(t, db.Exec(`UPDATE pool_ranges SET first_key = ? WHERE pool_id = ?`, key(160), b.ID).Error) // shrink
			wantViolation(t, "a new token with a name in use", db.Create(&models.APIToken{Name: "ops", Role: "viewer", TokenHash: "h9", CreatedAt: t0}).Error)
			wantViolation(t, "marking a token as a duplicate", db.Exec(`UPDATE api_tokens SET legacy_duplicate = TRUE WHERE name = 'ops'`).Error)
			wantViolation(t, "a new marked token", db.Exec(`INSERT INTO api_tokens (name, role, token_hash, created_at, legacy_duplicate) VALUES ('ops', 'viewer', 'h10', ?, TRUE)`, t0).Error)
			must(t, db.Create(&models.APIToken{Name: "ci-2", Role: "viewer", TokenHash: "h11", CreatedAt: t0}).Error)
		})
	}
}
