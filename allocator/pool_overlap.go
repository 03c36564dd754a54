package allocator

import (
	"context"
	"fmt"
	"slices"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

// Address pools never overlap one another (docs/pools.md): the ranges of
// every ipv4 pool form one address space, and so do those of every ipv6
// and ipv6prefix pool, where a delegated block counts as every address it
// covers. integer pools are separate namespaces (VLAN ids and VNIs may
// both be 1–4094).
//
// Creating a pool, adding or growing a range are refused with 409
// conflict naming the other pool and its range; a pool file reports such
// a range as drift and does not create it. The allocator checks under a
// per-family lock (PostgreSQL: a transaction-scoped advisory lock; SQLite:
// the database's single write lock), and the database refuses what
// bypasses it (migration 12: an exclusion constraint and a trigger on
// PostgreSQL, triggers on SQLite). Overlaps stored before that rule are
// kept, reported (CheckPools) and never made worse.

// addressFamily is the overlap namespace of a pool type ("" for integer
// pools, which may overlap).
func addressFamily(t PoolType) string {
	switch t {
	case TypeIPv4:
		return "ipv4"
	case TypeIPv6, TypeIPv6Prefix:
		return "ipv6"
	}
	return ""
}

// coverLast is the last address a range ending at last covers: last
// itself, or for an ipv6prefix pool the last address of its last block.
func (s space) coverLast(last u128) u128 {
	if s.typ != TypeIPv6Prefix {
		return last
	}
	st, _ := s.step().sub(u128{0, 1})
	c, _ := last.add(st)
	return c
}

// familyLocks are the advisory locks of the two address families
// (models/advisory.go), taken in this order.
var familyLocks = []struct {
	family string
	class  models.LockClass
}{{"ipv4", models.LockFamilyIPv4}, {"ipv6", models.LockFamilyIPv6}}

// lockFamilies takes the advisory lock of each family named that this
// transaction does not hold yet, ipv4 before ipv6 (PostgreSQL; on SQLite
// the transaction holds the write lock). A transaction takes them before
// any statement that can take the reserved lock (a range of a
// reservation pool written), and a pool file's load takes every family
// it needs at once: two transactions never hold one lock each and wait
// for the other's (models/advisory.go).
func (t *tx) lockFamilies(families ...string) error {
	if t.a.dialect != models.Postgres {
		return nil
	}
	for _, f := range familyLocks {
		if t.familyLocked[f.family] || !slices.Contains(families, f.family) {
			continue
		}
		if err := models.LockSchema(t.DB, f.class); err != nil {
			return err
		}
		if t.familyLocked == nil {
			t.familyLocked = map[string]bool{}
		}
		t.familyLocked[f.family] = true
	}
	return nil
}

// PoolOverlap is one pair of ranges of two address pools that overlap.
type PoolOverlap struct {
	Pool       string `json:"pool"`
	RangeID    string `json:"range_id"`
	First      string `json:"first"`
	Last       string `json:"last"`
	OtherPool  string `json:"other_pool"`
	OtherRange string `json:"other_range_id"`
	OtherFirst string `json:"other_first"`
	OtherLast  string `json:"other_last"`
}

// Message says the overlap in words, for logs, banners and the CLI.
func (o PoolOverlap) Message() string {
	return fmt.Sprintf("range %s..%s of pool %q overlaps range %s..%s of pool %q", o.First, o.Last, o.Pool, o.OtherFirst, o.OtherLast, o.OtherPool)
}

type familyRange struct {
	models.PoolRange
	Name              string
	Type              string
	DelegatePrefixLen int
}

func (r familyRange) bounds() (u128, u128) {
	sp := newSpace(PoolType(r.Type), r.DelegatePrefixLen)
	f, _ := parseKey(r.FirstKey)
	l, _ := parseKey(r.LastKey)
	return f, sp.coverLast(l)
}

// familyRanges reads every range of the pools of one address family.
func familyRanges(db *gorm.DB, family string) ([]familyRange, error) {
	types := []string{string(TypeIPv4)}
	if family == "ipv6" {
		types = []string{string(TypeIPv6), string(TypeIPv6Prefix)}
	}
	var rows []familyRange
	err := db.Table("pool_ranges").
		Select("pool_ranges.id, pool_ranges.pool_id, pool_ranges.first_key, pool_ranges.last_key, pool_ranges.first_value, pool_ranges.last_value, pool_ranges.auto_assign, pools.name AS name, pools.type AS type, pools.delegate_prefix_len AS delegate_prefix_len").
		Joins("JOIN pools ON pools.id = pool_ranges.pool_id").
		Where("pools.type IN ?", types).Order("pool_ranges.first_key, pool_ranges.id").Scan(&rows).Error
	return rows, err
}

// refuseOverlap answers 409 conflict when first..last of pool p (a new
// range, or range exceptID changed to these bounds) overlaps a range of
// another pool of its address family. field names the request's member.
func (t *tx) refuseOverlap(p *models.Pool, sp space, first, last u128, exceptID int64, field string) error {
	o, err := t.otherPoolOverlap(p, sp, first, last, exceptID)
	if err != nil || o == nil {
		return err
	}
	return fault.Errf(fault.CodeConflict, field, "range %s..%s of pool %q would overlap range %s..%s of pool %q: address pools never overlap one another",
		sp.format(first), sp.format(last), p.Name, o.FirstValue, o.LastValue, o.Name)
}

// otherPoolOverlap returns the first range of another pool of p's family
// that first..last overlaps, or nil.
func (t *tx) otherPoolOverlap(p *models.Pool, sp space, first, last u128, exceptID int64) (*familyRange, error) {
	fam := addressFamily(sp.typ)
	if fam == "" {
		return nil, nil
	}
	if err := t.lockFamilies(fam); err != nil {
		return nil, err
	}
	rows, err := familyRanges(t.DB, fam)
	if err != nil {
		return nil, err
	}
	cover := sp.coverLast(last)
	for i := range rows {
		r := &rows[i]
		if r.PoolID == p.ID || r.ID == exceptID {
			continue
		}
		f, l := r.bounds()
		if f.cmp(cover) <= 0 && first.cmp(l) <= 0 {
			return r, nil
		}
	}
	return nil, nil
}

// CheckPools lists every pair of overlapping ranges of different address
// pools (stored before the rule existed, or written around it): `ipledger
// pool check`, GET /api/v1/pools:check, the start-up log and the console's
// dashboard report them. Each pair is listed once.
func (a *Allocator) CheckPools(ctx context.Context) ([]PoolOverlap, error) {
	var out []PoolOverlap
	err := a.read(ctx, func(db *gorm.DB) error {
		var err error
		out, err = PoolOverlaps(db)
		return err
	})
	return out, err
}

// PoolOverlaps lists the overlapping pairs CheckPools answers, read with
// db (the consistency check reads them in its own snapshot).
func PoolOverlaps(db *gorm.DB) ([]PoolOverlap, error) {
	out := []PoolOverlap{}
	for _, fam := range []string{"ipv4", "ipv6"} {
		rows, err := familyRanges(db, fam)
		if err != nil {
			return nil, err
		}
		// Sorted by first address: each range is compared with the
		// ranges that start before its cover ends.
		for i := range rows {
			fi, li := rows[i].bounds()
			for j := i + 1; j < len(rows); j++ {
				fj, lj := rows[j].bounds()
				if fj.cmp(li) > 0 {
					break
				}
				if rows[i].PoolID == rows[j].PoolID || lj.cmp(fi) < 0 {
					continue
				}
				out = append(out, PoolOverlap{
					Pool: rows[i].Name, RangeID: itoa(rows[i].ID), First: rows[i].FirstValue, Last: rows[i].LastValue,
					OtherPool: rows[j].Name, OtherRange: itoa(rows[j].ID), OtherFirst: rows[j].FirstValue, OtherLast: rows[j].LastValue})
			}
		}
	}
	return out, nil
}
