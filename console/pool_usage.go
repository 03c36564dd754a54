package console

import (
	"context"
	"math/big"
	"sort"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/fault"
)

// UsagePoint is the number of values of a pool held at the end of one UTC
// day: Allocated (owned) and Quarantined.
type UsagePoint struct {
	Day         time.Time `json:"day"`
	Allocated   int64     `json:"allocated"`
	Quarantined int64     `json:"quarantined"`
}

// PoolUsage returns one point per UTC day for the last `days` days (today
// last) of how many values of the pool were allocated and quarantined. It
// starts from today's counts and replays the pool's allocation audit
// actions per day backwards (allocation.create +1 allocated, .release −1,
// .quarantine moves one to quarantined, .reclaim moves one back,
// .unquarantine and .quarantine_expired −1 quarantined). The per-day
// counts come from pool_usage_days, the roll-up of those audit events that
// a trigger keeps in each write's transaction (migration 6), so the cost is
// days × actions rows, not the number of events or allocations. Days
// before the pool's first event show the earliest known counts. days must
// be 1 to 366 (422 invalid); an unknown pool is 404.
func (c *Console) PoolUsage(ctx context.Context, pool string, days int) ([]UsagePoint, error) {
	if days < 1 || days > 366 {
		return nil, fault.Errf(fault.CodeInvalid, "days", "days must be 1 to 366, got %d", days)
	}
	p, err := c.a.GetPool(ctx, pool)
	if err != nil {
		return nil, err
	}
	return c.PoolUsageOf(ctx, p, days)
}

// PoolUsageOf is PoolUsage of a pool the caller has just read (GetPool or
// ListPools): today's counts are taken from p.Stats, so a page that shows
// the pool and its usage reads the pool's counts once.
func (c *Console) PoolUsageOf(ctx context.Context, p *allocator.Pool, days int) ([]UsagePoint, error) {
	if days < 1 || days > 366 {
		return nil, fault.Errf(fault.CodeInvalid, "days", "days must be 1 to 366, got %d", days)
	}
	pool := p.Name
	sum := func(xs ...string) int64 {
		t := new(big.Int)
		for _, x := range xs {
			if n, ok := new(big.Int).SetString(x, 10); ok {
				t.Add(t, n)
			}
		}
		return t.Int64()
	}
	alloc := sum(p.Stats.Auto.Allocated, p.Stats.Explicit.Allocated)
	quar := sum(p.Stats.Auto.Quarantined, p.Stats.Explicit.Quarantined)

	now := c.a.Now().UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	since := today.AddDate(0, 0, -(days - 1))
	type row struct {
		Day    string
		Action string
		N      int64
	}
	var rows []row
	// pool_usage_days is the per-day roll-up of the pool's allocation audit
	// events, kept by a trigger in the same transaction (migration 6): at
	// most days × actions rows, whatever the number of events.
	err := c.read(ctx, func(db *gorm.DB) error {
		return db.Raw(`SELECT day, action, n FROM pool_usage_days WHERE pool = ? AND day >= ?`,
			pool, since.Format("2006-01-02")).Scan(&rows).Error
	})
	if err != nil {
		return nil, err
	}
	type delta struct{ alloc, quar int64 }
	per := map[string]delta{}
	for _, r := range rows {
		d := per[r.Day]
		switch r.Action {
		case "allocation.create":
			d.alloc += r.N
		case "allocation.release":
			d.alloc -= r.N
		case "allocation.quarantine":
			d.alloc -= r.N
			d.quar += r.N
		case "allocation.reclaim":
			d.alloc += r.N
			d.quar -= r.N
		case "allocation.unquarantine", "allocation.quarantine_expired":
			d.quar -= r.N
		}
		per[r.Day] = d
	}
	out := make([]UsagePoint, days)
	for i := days - 1; i >= 0; i-- {
		day := since.AddDate(0, 0, i)
		out[i] = UsagePoint{Day: day, Allocated: max(alloc, 0), Quarantined: max(quar, 0)}
		d := per[day.Format("2006-01-02")]
		alloc -= d.alloc
		quar -= d.quar
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Day.Before(out[j].Day) })
	return out, nil
}
