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

// quarantineActive is the SQL condition (on alias a) for a quarantine that
// still holds its value, given the configured hold.
func (a *Allocator) activeQuarantineCond() (string, []any) {
	if a.hold <= 0 {
		return "1=1", nil
	}
	return "(a.state <> 'quarantined' OR a.quarantined_at > ?)", []any{a.now().Add(-a.hold)}
}

func (a *Allocator) poolOut(ctx context.Context, p *models.Pool) (*Pool, error) {
	sp := spaceOf(p)
	var ranges []models.PoolRange
	if err := a.read(ctx, func(db *gorm.DB) error {
		return db.Where("pool_id = ?", p.ID).Order("first_key").Find(&ranges).Error
	}); err != nil {
		return nil, err
	}
	type row struct {
		RangeID int64
		State   string
		N       int64
	}
	// Counts come from range_counts (kept by triggers in every write
	// transaction, migration 6), so a pool page costs the same with 1M
	// allocations as with ten. Under a quarantine hold, the quarantines
	// whose hold has run out are subtracted (partial index on quarantines:
	// the cost follows the number of quarantines).
	var counts []struct {
		RangeID     int64
		Allocated   int64
		Quarantined int64
	}
	err := a.read(ctx, func(db *gorm.DB) error {
		return db.Raw(`SELECT c.range_id, c.allocated, c.quarantined FROM range_counts c JOIN pool_ranges r ON r.id = c.range_id
			WHERE r.pool_id = ?`, p.ID).Scan(&counts).Error
	})
	if err != nil {
		return nil, err
	}
	expired := map[int64]int64{}
	if a.hold > 0 {
		var ex []row
		err := a.read(ctx, func(db *gorm.DB) error {
			return db.Raw(`SELECT r.id AS range_id, COUNT(*) AS n
				FROM pool_ranges r JOIN allocations a ON a.pool_id = r.pool_id AND a.value_key BETWEEN r.first_key AND r.last_key
				WHERE r.pool_id = ? AND a.state = 'quarantined' AND a.quarantined_at <= ? GROUP BY r.id`, p.ID, a.now().Add(-a.hold)).Scan(&ex).Error
		})
		if err != nil {
			return nil, err
		}
		for _, e := range ex {
			expired[e.RangeID] = e.N
		}
	}
	var rows []row
	for _, c := range counts {
		rows = append(rows, row{RangeID: c.RangeID, State: models.StateAllocated, N: c.Allocated},
			row{RangeID: c.RangeID, State: models.StateQuarantined, N: c.Quarantined - expired[c.RangeID]})
	}
	resv := map[int64]int64{}
	if col := reservationColumn(p.Name); col != "" {
		cond, args := a.activeQuarantineCond()
		var rr []row
		// An expired quarantine no longer holds its value: the value counts
		// as reserved again at once (docs/api.md).
		err := a.read(ctx, func(db *gorm.DB) error {
			return db.Raw(`SELECT r.id AS range_id, 'reserved' AS state, COUNT(*) AS n
				FROM pool_ranges r JOIN expected_dpus d ON d.`+col+` BETWEEN r.first_key AND r.last_key
				WHERE r.pool_id = ? AND NOT EXISTS (SELECT 1 FROM allocations a WHERE a.pool_id = r.pool_id AND a.value_key = d.`+col+` AND `+cond+`)
				GROUP BY r.id`, append([]any{p.ID}, args...)...).Scan(&rr).Error
		})
		if err != nil {
			return nil, err
		}
		for _, r := range rr {
			resv[r.RangeID] = r.N
		}
	}
	per := map[int64]bigCounts{}
	for _, r := range rows {
		c, ok := per[r.RangeID]
		if !ok {
			c = newBigCounts()
			per[r.RangeID] = c
		}
		if r.State == models.StateQuarantined {
			c.quar.SetInt64(r.N)
		} else {
			c.alloc.SetInt64(r.N)
		}
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
		c.resv.SetInt64(resv[ranges[i].ID])
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
