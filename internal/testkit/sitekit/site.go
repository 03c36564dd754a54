// Package sitekit builds a site for a test over the real allocator on the
// test's own database: pools and their ranges, allocations,
// ExpectedMachines with their DPUs, and machine reports, each failing the
// test on error. It imports the allocator, so the allocator's own
// (internal) tests cannot use it; every package above the allocator can.
package sitekit

import (
	"context"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/database/dbtest"
)

// Site is one test's allocator over its own database. Ctx carries the
// test's actor.
type Site struct {
	T   testing.TB
	DB  *gorm.DB
	A   *allocator.Allocator
	Ctx context.Context
}

// New builds a Site over db with the allocator options opts.
func New(t testing.TB, db *gorm.DB, opts allocator.Options) *Site {
	t.Helper()
	return Over(t, allocator.New(db, opts))
}

// Over builds a Site over an allocator the test has wired itself (with a
// commit hook, a clock).
func Over(t testing.TB, a *allocator.Allocator) *Site {
	return &Site{T: t, DB: a.DB(), A: a, Ctx: audit.WithActor(context.Background(), "test", "req-test")}
}

// Each runs fn on SQLite and PostgreSQL, each with a Site over its own
// fresh database.
func Each(t *testing.T, opts allocator.Options, fn func(t *testing.T, s *Site)) {
	t.Helper()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) { fn(t, New(t, db, opts)) })
}

// Range is a RangeSpec literal.
func Range(first, last string, auto bool) allocator.RangeSpec {
	return allocator.RangeSpec{First: first, Last: last, AutoAssign: &auto}
}

// Machine is the owner machine/id.
func Machine(id string) allocator.Owner { return allocator.Owner{Type: "machine", ID: id} }

// Pool creates a pool with its ranges (delegated prefixes of length plen
// for an ipv4prefix or ipv6prefix pool, else 0).
func (s *Site) Pool(name, typ string, plen int, ranges ...allocator.RangeSpec) *allocator.Pool {
	s.T.Helper()
	p, err := s.A.CreatePool(s.Ctx, allocator.PoolSpec{Name: name, Type: typ, DelegatePrefixLen: plen, Ranges: ranges})
	if err != nil {
		s.T.Fatalf("create pool %s: %v", name, err)
	}
	return p
}

// AddRange adds a range to pool.
func (s *Site) AddRange(pool string, r allocator.RangeSpec) *allocator.Range {
	s.T.Helper()
	out, err := s.A.AddRange(s.Ctx, pool, r)
	if err != nil {
		s.T.Fatalf("add range %s..%s to %s: %v", r.First, r.Last, pool, err)
	}
	return out
}

// Allocate allocates from pool for machine owner (requested "" for the
// lowest free value).
func (s *Site) Allocate(pool, owner, requested string) allocator.Allocation {
	s.T.Helper()
	al, _, err := s.A.Allocate(s.Ctx, pool, Machine(owner), requested)
	if err != nil {
		s.T.Fatalf("allocate %s for %s (requested %q): %v", pool, owner, requested, err)
	}
	return al
}

// Release releases value of pool held by machine owner.
func (s *Site) Release(pool, value, owner string) {
	s.T.Helper()
	if err := s.A.Release(s.Ctx, pool, value, Machine(owner)); err != nil {
		s.T.Fatalf("release %s %s by %s: %v", pool, value, owner, err)
	}
}

// Count counts the rows of model matching where.
func (s *Site) Count(model any, where string, args ...any) int64 {
	s.T.Helper()
	var n int64
	if err := s.DB.Model(model).Where(where, args...).Count(&n).Error; err != nil {
		s.T.Fatal(err)
	}
	return n
}
