package allocator

// Shared fixtures of the foundation tests (pools, allocate, pool files,
// concurrency, benchmarks). Names start with "fnd" so that other test files
// of this package can define their own helpers freely.

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/internal/testkit"
	"github.com/ipledger/ipledger/models"
)

// fnd is one test's allocator over its own database.
type fnd struct {
	t     *testing.T
	db    *gorm.DB
	a     *Allocator
	ctx   context.Context
	clock *testkit.Clock
}

func newFnd(t *testing.T, db *gorm.DB, hold time.Duration) *fnd {
	t.Helper()
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	a := New(db, Options{QuarantineHold: hold, Now: clock.Now})
	return &fnd{t: t, db: db, a: a, ctx: audit.WithActor(context.Background(), "test", "req-1"), clock: clock}
}

// fndEach runs fn on SQLite and PostgreSQL, each with its own database.
func fndEach(t *testing.T, fn func(t *testing.T, f *fnd)) {
	t.Helper()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) { fn(t, newFnd(t, db, 0)) })
}

func bptr(b bool) *bool { return &b }

// rng is a RangeSpec literal.
func rng(first, last string, auto bool) RangeSpec {
	return RangeSpec{First: first, Last: last, AutoAssign: bptr(auto)}
}

func (f *fnd) mkPool(name, typ string, plen int, ranges ...RangeSpec) *Pool {
	f.t.Helper()
	p, err := f.a.CreatePool(f.ctx, PoolSpec{Name: name, Type: typ, DelegatePrefixLen: plen, Ranges: ranges})
	if err != nil {
		f.t.Fatalf("create pool %s: %v", name, err)
	}
	return p
}

func own(id string) Owner { return Owner{Type: "machine", ID: id} }

// alloc allocates and fails the test on error.
func (f *fnd) alloc(pool, owner, requested string) Allocation {
	f.t.Helper()
	al, _, err := f.a.Allocate(f.ctx, pool, own(owner), requested)
	if err != nil {
		f.t.Fatalf("allocate %s for %s (requested %q): %v", pool, owner, requested, err)
	}
	return al
}

func (f *fnd) release(pool, value, owner string) {
	f.t.Helper()
	if err := f.a.Release(f.ctx, pool, value, own(owner)); err != nil {
		f.t.Fatalf("release %s %s by %s: %v", pool, value, owner, err)
	}
}

// quarantine moves value of pool to quarantine through the internal tx
// method that force delete uses.
func (f *fnd) quarantine(pool, value string) {
	f.t.Helper()
	err := f.a.write(f.ctx, func(t *tx) error {
		p, err := t.lockPool(pool)
		if err != nil {
			return err
		}
		v, err := spaceOf(p).parse(value)
		if err != nil {
			return err
		}
		var row models.Allocation
		if err := t.Where("pool_id = ? AND value_key = ?", p.ID, v.key()).Take(&row).Error; err != nil {
			return err
		}
		return t.quarantine(p, &row, "force delete")
	})
	if err != nil {
		f.t.Fatalf("quarantine %s %s: %v", pool, value, err)
	}
}

// declare inserts an ExpectedMachine with one ExpectedDpu declaring v4
// and/or v6 (canonical text) directly through the models, as the ExpectedMachine
// writes store them.
func (f *fnd) declare(serial, v4, v6 string) {
	f.t.Helper()
	h := fnv.New32a()
	h.Write([]byte(serial))
	k := h.Sum32() // a BMC MAC of its own per serial, in the canonical spelling the database holds
	mac := fmt.Sprintf("0e:00:%02x:%02x:%02x:%02x", byte(k>>24), byte(k>>16), byte(k>>8), byte(k))
	em := models.ExpectedMachine{ID: "em-" + serial, BmcMacAddress: mac,
		FallbackDPUSerialNumbers: "[]", MetadataLabels: "[]", Version: 1, CreatedAt: f.clock.Now(), UpdatedAt: f.clock.Now()}
	if err := f.db.Create(&em).Error; err != nil {
		f.t.Fatalf("insert expected machine: %v", err)
	}
	d := models.ExpectedDPU{ExpectedMachineID: em.ID, SerialNumber: serial}
	if v4 != "" {
		a, err := parseAddr(v4)
		if err != nil {
			f.t.Fatal(err)
		}
		k := fromAddr(a).key()
		d.LoopbackIP, d.LoopbackIPKey = &v4, &k
	}
	if v6 != "" {
		a, err := parseAddr(v6)
		if err != nil {
			f.t.Fatal(err)
		}
		k := fromAddr(a).key()
		d.LoopbackIPv6, d.LoopbackIPv6Key = &v6, &k
	}
	if err := f.db.Create(&d).Error; err != nil {
		f.t.Fatalf("insert expected dpu: %v", err)
	}
}

// snapshot is everything a refused change must leave untouched.
type snapshot struct {
	pools, ranges, allocs, events string
}

func (f *fnd) snap() snapshot {
	f.t.Helper()
	dump := func(model any, order string) string {
		var rows []map[string]any
		if err := f.db.Model(model).Order(order).Find(&rows).Error; err != nil {
			f.t.Fatalf("dump: %v", err)
		}
		b, err := json.Marshal(rows)
		if err != nil {
			f.t.Fatalf("dump: %v", err)
		}
		return string(b)
	}
	return snapshot{
		pools:  dump(&models.Pool{}, "id"),
		ranges: dump(&models.PoolRange{}, "id"),
		allocs: dump(&models.Allocation{}, "id"),
		events: dump(&models.AuditEvent{}, "id"),
	}
}

func (f *fnd) unchanged(before snapshot, what string) {
	f.t.Helper()
	after := f.snap()
	if before != after {
		f.t.Fatalf("%s changed stored state:\nbefore %+v\nafter  %+v", what, before, after)
	}
}

// checkRunEnds verifies the gap-search index of pool: every row's run_end
// is true exactly when the next value of the space is not a row.
func (f *fnd) checkRunEnds(pool string) {
	f.t.Helper()
	if err := f.runEndsWrong(pool); err != nil {
		f.t.Fatal(err)
	}
}

// runEndsWrong is checkRunEnds's finding, nil when every run-end flag of
// pool is exact.
func (f *fnd) runEndsWrong(pool string) error {
	var p models.Pool
	if err := f.db.Where("name = ?", pool).Take(&p).Error; err != nil {
		return err
	}
	sp := spaceOf(&p)
	var rows []models.Allocation
	if err := f.db.Where("pool_id = ?", p.ID).Order("value_key").Find(&rows).Error; err != nil {
		return err
	}
	held := map[string]bool{}
	for _, r := range rows {
		held[r.ValueKey] = true
	}
	for _, r := range rows {
		v, _ := parseKey(r.ValueKey)
		want := true
		if n, ok := sp.next(v); ok {
			want = !held[n.key()]
		}
		if r.RunEnd != want {
			return fmt.Errorf("pool %s value %s: run_end=%t, want %t", pool, r.Value, r.RunEnd, want)
		}
	}
	return nil
}

func (f *fnd) countRows(model any, where string, args ...any) int64 {
	f.t.Helper()
	var n int64
	if err := f.db.Model(model).Where(where, args...).Count(&n).Error; err != nil {
		f.t.Fatal(err)
	}
	return n
}
