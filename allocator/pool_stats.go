package allocator

import (
	"context"
	"math/big"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/models"
)

// Counts are the figures of one kind of range; every count is a decimal
// string because an IPv6 pool does not fit in 64 bits. free = size −
// allocated − quarantined − reserved.
type Counts struct {
	Size        string `json:"size"`
	Allocated   string `json:"allocated"`
	Free        string `json:"free"`
	Quarantined string `json:"quarantined"`
	Reserved    string `json:"reserved"`
}

// PoolStats splits the counts by auto_assign and explicit ranges.
type PoolStats struct {
	Auto     Counts `json:"auto"`
	Explicit Counts `json:"explicit"`
}

type bigCounts struct{ size, alloc, quar, resv *big.Int }

func newBigCounts() bigCounts {
	return bigCounts{new(big.Int), new(big.Int), new(big.Int), new(big.Int)}
}

func (c bigCounts) add(o bigCounts) {
	c.size.Add(c.size, o.size)
	c.alloc.Add(c.alloc, o.alloc)
	c.quar.Add(c.quar, o.quar)
	c.resv.Add(c.resv, o.resv)
}

func (c bigCounts) counts() Counts {
	free := new(big.Int).Sub(c.size, c.alloc)
	free.Sub(free, c.quar)
	free.Sub(free, c.resv)
	return Counts{Size: c.size.String(), Allocated: c.alloc.String(), Free: free.String(),
		Quarantined: c.quar.String(), Reserved: c.resv.String()}
}

// Used is the share of the pool (both kinds of range) that is not free, in
// [0, 1], for utilization bars and alerts.
func (s PoolStats) Used() float64 {
	size, free := new(big.Float), new(big.Float)
	for _, c := range []Counts{s.Auto, s.Explicit} {
		a, _ := new(big.Float).SetString(c.Size)
		f, _ := new(big.Float).SetString(c.Free)
		if a != nil {
			size.Add(size, a)
		}
		if f != nil {
			free.Add(free, f)
		}
	}
	if size.Sign() == 0 {
		return 0
	}
	used := new(big.Float).Sub(size, free)
	r, _ := new(big.Float).Quo(used, size).Float64()
	return r
}

func (a *Allocator) poolOut(ctx context.Context, p *models.Pool) (*Pool, error) {
	sp := spaceOf(p)
	var ranges []models.PoolRange
	if err := a.read(ctx, func(db *gorm.DB) error {
		return db.Where("pool_id = ?", p.ID).Order("first_key").Find(&ranges).Error
	}); err != nil {
		return nil, err
	}
	// Every count comes from range_counts, kept by triggers in every write
	// transaction (migrations 6 and 29), so a pool page costs the same with
	// 1M allocations and 100,000 reservations as with ten. Under a
	// quarantine hold, the quarantines whose hold has run out no longer
	// hold their value (docs/api.md): they are subtracted from the
	// quarantined count and, when an ExpectedDpu reserves the value, the
	// value counts as reserved again at once. They are read through the
	// partial index on quarantines: the cost follows the number of
	// quarantines.
	var counts []struct {
		RangeID        int64
		Allocated      int64
		Quarantined    int64
		ReservedUnheld int64
	}
	err := a.read(ctx, func(db *gorm.DB) error {
		return db.Raw(`SELECT c.range_id, c.allocated, c.quarantined, c.reserved_unheld FROM range_counts c JOIN pool_ranges r ON r.id = c.range_id
			WHERE r.pool_id = ?`, p.ID).Scan(&counts).Error
	})
	if err != nil {
		return nil, err
	}
	type expiredRow struct {
		RangeID  int64
		N        int64
		Reserved int64
	}
	expired := map[int64]expiredRow{}
	if a.hold > 0 {
		reserved := "0"
		if col := reservationColumn(p.Name); col != "" {
			reserved = `COALESCE(SUM(CASE WHEN EXISTS (SELECT 1 FROM expected_dpus d WHERE d.` + col + ` = a.value_key) THEN 1 ELSE 0 END), 0)`
		}
		var ex []expiredRow
		err := a.read(ctx, func(db *gorm.DB) error {
			return db.Raw(`SELECT r.id AS range_id, COUNT(*) AS n, `+reserved+` AS reserved
				FROM pool_ranges r JOIN allocations a ON a.pool_id = r.pool_id AND a.value_key BETWEEN r.first_key AND r.last_key
				WHERE r.pool_id = ? AND a.state = 'quarantined' AND a.quarantined_at <= ? GROUP BY r.id`, p.ID, a.now().Add(-a.hold)).Scan(&ex).Error
		})
		if err != nil {
			return nil, err
		}
		for _, e := range ex {
			expired[e.RangeID] = e
		}
	}
	per := map[int64]bigCounts{}
	for _, c := range counts {
		e := expired[c.RangeID]
		b := newBigCounts()
		b.alloc.SetInt64(c.Allocated)
		b.quar.SetInt64(c.Quarantined - e.N)
		b.resv.SetInt64(c.ReservedUnheld + e.Reserved)
		per[c.RangeID] = b
	}
	out := &Pool{Name: p.Name, Type: PoolType(p.Type), DelegatePrefixLen: p.DelegatePrefixLen, Gateway: p.Gateway, Version: p.Version, Ranges: []Range{}}
	auto, expl := newBigCounts(), newBigCounts()
	for i := range ranges {
		r := rangeOut(sp, &ranges[i])
		c, ok := per[ranges[i].ID]
		if !ok {
			c = newBigCounts()
		}
		c.size.SetString(r.Size, 10)
		r.Stats = c.counts()
		if ranges[i].AutoAssign {
			auto.add(c)
		} else {
			expl.add(c)
		}
		out.Ranges = append(out.Ranges, r)
	}
	out.Stats = PoolStats{Auto: auto.counts(), Explicit: expl.counts()}
	return out, nil
}
