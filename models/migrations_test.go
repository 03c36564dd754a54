package models_test

import (
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

func key(n uint64) string { return fmt.Sprintf("%032x", n) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Migrations apply once, are recorded, and applying them again is a no-op.
func TestMigrateIdempotent(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		for i := 0; i < 2; i++ {
			if err := models.Migrate(db); err != nil {
				t.Fatalf("migrate again (%d): %v", i, err)
			}
		}
		var versions []int
		if err := db.Raw(`SELECT version FROM schema_migrations ORDER BY version`).Scan(&versions).Error; err != nil {
			t.Fatal(err)
		}
		if len(versions) != len(models.Migrations) || versions[len(versions)-1] != models.SchemaVersion() || models.SchemaVersion() < 5 {
			t.Fatalf("recorded versions %v, build knows %d migrations up to %d", versions, len(models.Migrations), models.SchemaVersion())
		}
		seen := map[int]bool{}
		for _, m := range models.Migrations {
			if m.Version < 1 || seen[m.Version] {
				t.Fatalf("migration version %d is not positive and unique", m.Version)
			}
			seen[m.Version] = true
		}
		for _, table := range []string{"pools", "pool_ranges", "allocations", "audit_events", "api_tokens", "settings",
			"expected_machines", "expected_dpus", "machines", "network_configs"} {
			var n int64
			if err := db.Table(table).Count(&n).Error; err != nil {
				t.Fatalf("table %s: %v", table, err)
			}
		}
	})
}

// A build refuses to run against a schema newer than it knows.
func TestMigrateRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		next := models.SchemaVersion() + 1
		if err := db.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'from the future', ?)`, next, t0).Error; err != nil {
			t.Fatal(err)
		}
		err := models.Migrate(db)
		if err == nil || !strings.Contains(err.Error(), "newer than this build") {
			t.Fatalf("want a refusal, got %v", err)
		}
	})
}

// An existing database refuses a migration whose version is lower than the
// highest it has applied (it would run last here and first on a new
// database), names both versions, and applies nothing; a migration above
// the highest applies, and unused version numbers are no obstacle.
func TestMigrateRefusesLowerVersion(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		newest := models.SchemaVersion()
		rows := func() int64 {
			var n int64
			must(t, db.Raw(`SELECT COUNT(*) FROM schema_migrations`).Scan(&n).Error)
			return n
		}
		before := rows()
		late := models.Migration{Version: 2, Name: "late table", SQL: `CREATE TABLE late_table (x INTEGER)`}
		next := models.Migration{Version: newest + 1, Name: "next table", SQL: `CREATE TABLE next_table (x INTEGER)`}
		err := models.MigrateList(db, append(append([]models.Migration{}, models.Migrations...), late, next))
		want := fmt.Sprintf("version 2 is lower than version %d", newest)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "late table") {
			t.Fatalf("want a refusal containing %q, got %v", want, err)
		}
		if n := rows(); n != before {
			t.Fatalf("schema_migrations went from %d to %d rows after a refusal", before, n)
		}
		for _, table := range []string{"late_table", "next_table"} {
			if db.Migrator().HasTable(table) {
				t.Fatalf("refused migration run still created %s", table)
			}
		}

		// A known migration whose record was lost counts as lower too.
		third := models.Migrations[1].Version
		must(t, db.Exec(`DELETE FROM schema_migrations WHERE version = ?`, third).Error)
		err = models.Migrate(db)
		want = fmt.Sprintf("version %d is lower than version %d", third, newest)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("want a refusal containing %q, got %v", want, err)
		}
		must(t, db.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'restored', ?)`, third, t0).Error)

		// Above the highest: applied, and recorded.
		if err := models.MigrateList(db, append(append([]models.Migration{}, models.Migrations...), next)); err != nil {
			t.Fatalf("migration above the highest: %v", err)
		}
		if !db.Migrator().HasTable("next_table") || rows() != before+1 {
			t.Fatalf("migration %d not applied and recorded (%d rows, want %d)", next.Version, rows(), before+1)
		}
	})
}

// Several processes starting at once on a fresh database each run Migrate:
// every migration is applied exactly once and none of them fails.
func TestMigrateConcurrentStarts(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			// Several rounds: the race on the bookkeeping table itself
			// (CREATE TABLE IF NOT EXISTS from several processes) showed up
			// in one CI run out of many.
			for round := 0; round < 5; round++ {
				var u string
				if d == models.Postgres {
					u = dbtest.NewPostgresURL(t)
				} else {
					u = dbtest.NewSQLiteURL(t)
				}
				const n = 4
				dbs := make([]*gorm.DB, n)
				for i := range dbs {
					db, _, err := database.Open(u)
					if err != nil {
						t.Fatal(err)
					}
					s, _ := db.DB()
					t.Cleanup(func() { s.Close() })
					dbs[i] = db
				}
				errs := make([]error, n)
				var wg sync.WaitGroup
				for i := range dbs {
					wg.Add(1)
					go func(i int) {
						defer wg.Done()
						errs[i] = models.Migrate(dbs[i])
					}(i)
				}
				wg.Wait()
				for i, err := range errs {
					if err != nil {
						t.Fatalf("round %d, process %d: %v", round, i, err)
					}
				}
				var count int64
				dbs[0].Raw(`SELECT COUNT(*) FROM schema_migrations`).Scan(&count)
				if int(count) != len(models.Migrations) {
					t.Fatalf("round %d: %d rows in schema_migrations, want %d", round, count, len(models.Migrations))
				}
			}
		})
	}
}

// fixture inserts one pool with one range 10..19 and one allocation at 15,
// directly through gorm.
func fixture(t *testing.T, db *gorm.DB) (models.Pool, models.PoolRange) {
	t.Helper()
	p := models.Pool{Name: "p", Type: "integer", Version: 1, CreatedAt: t0, UpdatedAt: t0}
	must(t, db.Create(&p).Error)
	r := models.PoolRange{PoolID: p.ID, FirstKey: key(10), LastKey: key(19), FirstValue: "10", LastValue: "19", AutoAssign: true, Version: 1, CreatedAt: t0}
	must(t, db.Create(&r).Error)
	must(t, db.Create(alloc(p.ID, 15, "a")).Error)
	return p, r
}

func alloc(pool int64, v uint64, owner string) *models.Allocation {
	ot, oid := "machine", owner
	return &models.Allocation{PoolID: pool, ValueKey: key(v), Value: fmt.Sprint(v), State: "allocated",
		OwnerType: &ot, OwnerID: &oid, RunEnd: true, AllocatedAt: t0}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Every rule the allocator enforces has a database constraint behind it:
// writes that bypass the allocator and break a rule fail on both
// databases, and the error is recognised as a constraint violation (so it
// surfaces as 409, never 500).
func TestConstraintsHoldWithoutTheAllocator(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		p, r := fixture(t, db)
		em := models.ExpectedMachine{ID: "em-1", BmcMacAddress: "02:00:00:00:00:01", FallbackDPUSerialNumbers: "[]", MetadataLabels: "[]",
			Version: 1, CreatedAt: t0, UpdatedAt: t0}
		must(t, db.Create(&em).Error)
		s := func(v string) *string { return &v }
		must(t, db.Create(&models.ExpectedDPU{ExpectedMachineID: "em-1", SerialNumber: "MT-1",
			LoopbackIP: s("10.0.0.1"), LoopbackIPKey: s(key(0x0a000001)), LoopbackIPv6: s("fd00::1"), LoopbackIPv6Key: s(key(1))}).Error)
		other := "other"
		quarantinedWithOwner := alloc(p.ID, 16, "q")
		quarantinedWithOwner.State = "quarantined"
		quarantinedWithOwner.QuarantinedAt = &t0
		noOwner := alloc(p.ID, 17, "x")
		noOwner.OwnerID = nil

		cases := []struct {
			name string
			run  func(db *gorm.DB) error
		}{
			{"duplicate (pool, value)", func(db *gorm.DB) error { return db.Create(alloc(p.ID, 15, "b")).Error }},
			{"duplicate (pool, owner)", func(db *gorm.DB) error { return db.Create(alloc(p.ID, 16, "a")).Error }},
			{"allocation outside every range", func(db *gorm.DB) error { return db.Create(alloc(p.ID, 20, "c")).Error }},
			{"allocation below every range", func(db *gorm.DB) error { return db.Create(alloc(p.ID, 9, "c")).Error }},
			{"allocation moved outside its range", func(db *gorm.DB) error {
				return db.Model(&models.Allocation{}).Where("pool_id = ? AND value_key = ?", p.ID, key(15)).Update("value_key", key(25)).Error
			}},
			{"overlapping range", func(db *gorm.DB) error {
				return db.Create(&models.PoolRange{PoolID: p.ID, FirstKey: key(19), LastKey: key(30), FirstValue: "19", LastValue: "30", Version: 1, CreatedAt: t0}).Error
			}},
			{"range inside a range", func(db *gorm.DB) error {
				return db.Create(&models.PoolRange{PoolID: p.ID, FirstKey: key(12), LastKey: key(13), FirstValue: "12", LastValue: "13", Version: 1, CreatedAt: t0}).Error
			}},
			{"range grown into another", func(db *gorm.DB) error {
				n := models.PoolRange{PoolID: p.ID, FirstKey: key(30), LastKey: key(39), FirstValue: "30", LastValue: "39", Version: 1, CreatedAt: t0}
				if err := db.Create(&n).Error; err != nil {
					return fmt.Errorf("setup: %w", err)
				}
				return db.Model(&models.PoolRange{}).Where("id = ?", n.ID).Update("first_key", key(19)).Error
			}},
			{"reversed range", func(db *gorm.DB) error {
				return db.Create(&models.PoolRange{PoolID: p.ID, FirstKey: key(50), LastKey: key(40), FirstValue: "50", LastValue: "40", Version: 1, CreatedAt: t0}).Error
			}},
			{"delete a range under an allocation", func(db *gorm.DB) error { return db.Delete(&models.PoolRange{}, r.ID).Error }},
			{"shrink a range from under an allocation", func(db *gorm.DB) error {
				return db.Model(&models.PoolRange{}).Where("id = ?", r.ID).Update("last_key", key(14)).Error
			}},
			{"allocated without an owner", func(db *gorm.DB) error { return db.Create(noOwner).Error }},
			{"quarantined with an owner", func(db *gorm.DB) error { return db.Create(quarantinedWithOwner).Error }},
			{"unknown state", func(db *gorm.DB) error {
				a := alloc(p.ID, 18, "s")
				a.State = "free"
				return db.Create(a).Error
			}},
			{"unknown pool type", func(db *gorm.DB) error {
				return db.Create(&models.Pool{Name: "q", Type: "ipv5", Version: 1, CreatedAt: t0, UpdatedAt: t0}).Error
			}},
			{"duplicate pool name", func(db *gorm.DB) error {
				return db.Create(&models.Pool{Name: "p", Type: "ipv4", Version: 1, CreatedAt: t0, UpdatedAt: t0}).Error
			}},
			{"duplicate ExpectedDpu serial", func(db *gorm.DB) error {
				return db.Create(&models.ExpectedDPU{ExpectedMachineID: "em-1", Position: 1, SerialNumber: "MT-1"}).Error
			}},
			{"duplicate ExpectedDpu loopback_ip", func(db *gorm.DB) error {
				return db.Create(&models.ExpectedDPU{ExpectedMachineID: "em-1", Position: 1, SerialNumber: "MT-2", LoopbackIP: s("10.0.0.1"), LoopbackIPKey: s(key(0x0a000001))}).Error
			}},
			{"duplicate ExpectedDpu loopback_ip_v6", func(db *gorm.DB) error {
				return db.Create(&models.ExpectedDPU{ExpectedMachineID: "em-1", Position: 1, SerialNumber: "MT-3", LoopbackIPv6: s("fd00::1"), LoopbackIPv6Key: s(key(1))}).Error
			}},
			{"ExpectedDpu of no ExpectedMachine", func(db *gorm.DB) error {
				return db.Create(&models.ExpectedDPU{ExpectedMachineID: "em-missing", SerialNumber: "MT-4"}).Error
			}},
			{"duplicate BMC MAC", func(db *gorm.DB) error {
				return db.Create(&models.ExpectedMachine{ID: "em-2", BmcMacAddress: "02:00:00:00:00:01", FallbackDPUSerialNumbers: "[]", MetadataLabels: "[]", Version: 1, CreatedAt: t0, UpdatedAt: t0}).Error
			}},
			{"allocation of no pool", func(db *gorm.DB) error { return db.Create(alloc(p.ID+100, 15, other)).Error }},
		}
		for _, c := range cases {
			// Each attempt runs in a transaction that is rolled back, so that
			// a setup step of one case cannot leak into the next.
			var inner error
			err := db.Transaction(func(tx *gorm.DB) error {
				inner = c.run(tx)
				if inner == nil {
					return nil
				}
				return errRollback
			})
			if inner == nil {
				t.Fatalf("%s: the database accepted it", c.name)
			}
			if strings.HasPrefix(inner.Error(), "setup:") {
				t.Fatalf("%s: %v", c.name, inner)
			}
			if !database.IsConstraintViolation(inner) {
				t.Fatalf("%s: error %v is not recognised as a constraint violation", c.name, inner)
			}
			if database.IsRetryable(inner) || database.IsUnavailable(inner) {
				t.Fatalf("%s: constraint violation %v classified as retryable/unavailable", c.name, inner)
			}
			if err != errRollback {
				t.Fatalf("%s: transaction ended with %v", c.name, err)
			}
		}
		// Nothing of the refused writes stayed.
		var n int64
		db.Model(&models.Allocation{}).Count(&n)
		if n != 1 {
			t.Fatalf("%d allocations after refused writes, want 1", n)
		}
		db.Model(&models.PoolRange{}).Count(&n)
		if n != 1 {
			t.Fatalf("%d ranges after refused writes, want 1", n)
		}
		// What is allowed still works: a range that only touches, an
		// allocation in it, a range removal once empty.
		must(t, db.Create(&models.PoolRange{PoolID: p.ID, FirstKey: key(20), LastKey: key(29), FirstValue: "20", LastValue: "29", Version: 1, CreatedAt: t0}).Error)
		must(t, db.Create(alloc(p.ID, 20, "c")).Error)
		must(t, db.Where("value_key = ?", key(20)).Delete(&models.Allocation{}).Error)
		must(t, db.Where("first_key = ?", key(20)).Delete(&models.PoolRange{}).Error)
	})
}

var errRollback = fmt.Errorf("rollback")

// Ranges of different pools may overlap; the exclusion is per pool.
func TestRangesOfDifferentPoolsMayOverlap(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		for _, name := range []string{"a", "b"} {
			p := models.Pool{Name: name, Type: "integer", Version: 1, CreatedAt: t0, UpdatedAt: t0}
			must(t, db.Create(&p).Error)
			must(t, db.Create(&models.PoolRange{PoolID: p.ID, FirstKey: key(1), LastKey: key(100), FirstValue: "1", LastValue: "100", Version: 1, CreatedAt: t0}).Error)
		}
	})
}

// The SQLite DSN starts every transaction with BEGIN IMMEDIATE and waits
// (busy_timeout) for the write lock: a second handle on the same file —
// another process — blocks at BEGIN until the first commits, instead of
// failing later with SQLITE_BUSY on its first write.
func TestSQLiteBeginImmediateQueuesWriters(t *testing.T) {
	t.Parallel()
	u := dbtest.NewSQLiteURL(t)
	db1 := dbtest.OpenURL(t, u)
	db2, _, err := database.Open(u)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := db2.DB()
	defer s2.Close()
	s1, _ := db1.DB()

	tx1, err := s1.Begin()
	if err != nil {
		t.Fatal(err)
	}
	began := make(chan *sql.Tx, 1)
	go func() {
		tx2, err := s2.Begin()
		if err != nil {
			t.Errorf("second BEGIN: %v", err)
			close(began)
			return
		}
		began <- tx2
	}()
	select {
	case <-began:
		t.Fatal("a second writer began while the first held the write lock: BEGIN is not IMMEDIATE")
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := tx1.Exec(`INSERT INTO settings (key, value) VALUES ('k', 'one')`); err != nil {
		t.Fatal(err)
	}
	if err := tx1.Commit(); err != nil {
		t.Fatal(err)
	}
	tx2, ok := <-began
	if !ok {
		return
	}
	if _, err := tx2.Exec(`UPDATE settings SET value = 'two' WHERE key = 'k'`); err != nil {
		t.Fatalf("second writer after the first committed: %v", err)
	}
	if err := tx2.Commit(); err != nil {
		t.Fatal(err)
	}
	var v string
	db1.Raw(`SELECT value FROM settings WHERE key = 'k'`).Scan(&v)
	if v != "two" {
		t.Fatalf("value %q", v)
	}
}

// Database URLs (README.md).
func TestParseURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in      string
		dialect models.Dialect
		path    string
		bad     bool
	}{
		{"postgres://u@h/db", models.Postgres, "", false},
		{"postgresql://u@h:5433/db?sslmode=disable", models.Postgres, "", false},
		{"sqlite:ipledger.db", models.SQLite, "ipledger.db", false},
		{"sqlite:///var/lib/ipledger/x.db", models.SQLite, "/var/lib/ipledger/x.db", false},
		{"sqlite:/tmp/x", models.SQLite, "/tmp/x", false},
		{"sqlite:/var/lib/ipledger/x", models.SQLite, "/var/lib/ipledger/x", false},
		{"data/site.db", models.SQLite, "data/site.db", false},
		{"sqlite:", "", "", true},
		{"mysql://u@h/db", "", "", true},
		{"ipledger", "", "", true},
	} {
		got, err := database.ParseURL(c.in)
		if c.bad {
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", c.in)) {
				t.Fatalf("%q: want an error naming it, got %v", c.in, err)
			}
			continue
		}
		if err != nil || got.Dialect != c.dialect || got.Path != c.path {
			t.Fatalf("%q: %+v %v", c.in, got, err)
		}
		if c.dialect == models.SQLite && (!strings.Contains(got.DSN, "_txlock=immediate") || !strings.Contains(got.DSN, "busy_timeout")) {
			t.Fatalf("%q: SQLite DSN %q lacks BEGIN IMMEDIATE or busy_timeout", c.in, got.DSN)
		}
	}
}

// The range rules hold against concurrent writers that bypass the
// allocator (and its pool lock): removing a range while another
// transaction inserts an allocation into it, in either order, never
// leaves an allocation outside every range. On SQLite the second writer
// waits at BEGIN; on PostgreSQL the triggers serialise on the pool row.
func TestRangeRemovalRacesAllocationInsert(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		for _, deleteFirst := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/delete-first=%t", d, deleteFirst), func(t *testing.T) {
				var u string
				if d == models.Postgres {
					u = dbtest.NewPostgresURL(t)
				} else {
					u = dbtest.NewSQLiteURL(t)
				}
				g1 := dbtest.OpenURL(t, u)
				g2, _, err := database.Open(u)
				if err != nil {
					t.Fatal(err)
				}
				s2, _ := g2.DB()
				defer s2.Close()
				s1, _ := g1.DB()
				p, _ := fixture(t, g1) // range 10..19 holding 15
				must(t, g1.Where("value_key = ?", key(15)).Delete(&models.Allocation{}).Error)
				var rangeID int64
				g1.Raw(`SELECT id FROM pool_ranges WHERE pool_id = ?`, p.ID).Scan(&rangeID)

				del := func(tx *sql.Tx) error {
					_, err := tx.Exec(`DELETE FROM pool_ranges WHERE id = $1`, rangeID)
					return err
				}
				ins := func(tx *sql.Tx) error {
					_, err := tx.Exec(`INSERT INTO allocations (pool_id, value_key, value, state, owner_type, owner_id, run_end, allocated_at)
						VALUES ($1, $2, '15', 'allocated', 'machine', 'racer', TRUE, $3)`, p.ID, key(15), t0)
					return err
				}
				first, second := del, ins
				if !deleteFirst {
					first, second = ins, del
				}
				tx1, err := s1.Begin()
				if err != nil {
					t.Fatal(err)
				}
				if err := first(tx1); err != nil {
					t.Fatalf("first writer: %v", err)
				}
				done := make(chan error, 1)
				go func() {
					tx2, err := s2.Begin()
					if err != nil {
						done <- err
						return
					}
					if err := second(tx2); err != nil {
						tx2.Rollback()
						done <- err
						return
					}
					done <- tx2.Commit()
				}()
				select {
				case err := <-done:
					t.Fatalf("the second writer finished while the first was open (err=%v): nothing serialises them", err)
				case <-time.After(300 * time.Millisecond):
				}
				must(t, tx1.Commit())
				err = <-done
				if err == nil || !database.IsConstraintViolation(err) {
					t.Fatalf("second writer: %v, want a constraint violation", err)
				}
				var orphans int64
				g1.Raw(`SELECT COUNT(*) FROM allocations a WHERE NOT EXISTS (SELECT 1 FROM pool_ranges r
					WHERE r.pool_id = a.pool_id AND a.value_key BETWEEN r.first_key AND r.last_key)`).Scan(&orphans)
				if orphans != 0 {
					t.Fatalf("%d allocations lie outside every range", orphans)
				}
			})
		}
	}
}

// Concurrent writers that bypass the allocator still cannot create two
// overlapping ranges in one pool, nor two rows for one (pool, value) or
// one (pool, owner): exactly one of them wins, the others get a
// constraint violation.
func TestConstraintsUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			var u string
			if d == models.Postgres {
				u = dbtest.NewPostgresURL(t)
			} else {
				u = dbtest.NewSQLiteURL(t)
			}
			g := dbtest.OpenURL(t, u)
			p, _ := fixture(t, g) // range 10..19, allocation 15 owned by "a"
			const n = 8
			handles := make([]*gorm.DB, n)
			for i := range handles {
				h, _, err := database.Open(u)
				if err != nil {
					t.Fatal(err)
				}
				s, _ := h.DB()
				t.Cleanup(func() { s.Close() })
				handles[i] = h
			}
			race := func(name string, write func(i int, tx *gorm.DB) error) {
				errs := make([]error, n)
				var wg sync.WaitGroup
				start := make(chan struct{})
				for i := range handles {
					wg.Add(1)
					go func(i int) {
						defer wg.Done()
						<-start
						// A deadlock or serialization failure is the database
						// refusing to decide yet; the allocator retries those,
						// and so does this writer.
						for attempt := 0; attempt < 10; attempt++ {
							errs[i] = handles[i].Transaction(func(tx *gorm.DB) error { return write(i, tx) })
							if !database.IsRetryable(errs[i]) {
								break
							}
						}
					}(i)
				}
				close(start)
				wg.Wait()
				wins := 0
				for i, err := range errs {
					switch {
					case err == nil:
						wins++
					case database.IsConstraintViolation(err):
					default:
						t.Fatalf("%s: writer %d: %v", name, i, err)
					}
				}
				if wins != 1 {
					t.Fatalf("%s: %d writers won, want exactly 1", name, wins)
				}
			}
			race("overlapping ranges", func(i int, tx *gorm.DB) error {
				// 100+i .. 200+i: every pair overlaps.
				return tx.Create(&models.PoolRange{PoolID: p.ID, FirstKey: key(uint64(100 + i)), LastKey: key(uint64(200 + i)),
					FirstValue: fmt.Sprint(100 + i), LastValue: fmt.Sprint(200 + i), Version: 1, CreatedAt: t0}).Error
			})
			race("one value, many owners", func(i int, tx *gorm.DB) error {
				return tx.Create(alloc(p.ID, 16, fmt.Sprint("owner-", i))).Error
			})
			race("one owner, many values", func(i int, tx *gorm.DB) error {
				return tx.Create(alloc(p.ID, uint64(110+i), "same-owner")).Error
			})
		})
	}
}
