package console

import (
	"context"
	"math"
	"math/big"
	"sort"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/audit"

	"github.com/ipledger/ipledger/allocator"
)

// Fleet is the site at a glance, as the NOC wallboard shows it: hosts by
// state, DPUs with every loopback assigned (complete) or not, DPU families
// by binding status, the pools nearest exhaustion with a forecast, and
// the latest force deletes and binding conflicts.
type Fleet struct {
	Hosts          int64
	HostsByState   map[string]int64
	DPUs           int64
	DPUsComplete   int64
	DPUsIncomplete int64
	// Bindings counts DPU families (IPv4 and IPv6 each) by status.
	Bindings     map[string]int64
	Forecasts    []PoolForecast
	ForceDeletes []audit.Event
	Conflicts    []allocator.Binding
}

// PoolForecast is one pool's use and how long its free values last at the
// rate of the last 30 days (from the usage history, PoolUsage).
type PoolForecast struct {
	Pool allocator.Pool
	// Used is the share of the whole pool in use, ExplicitUsed the share
	// of its explicit (auto_assign=false) ranges, -1 when it has none.
	Used, ExplicitUsed float64
	// Free is the number of free values (a decimal string).
	Free string
	// PerDay is the net number of values taken per day over the window
	// (negative when the pool is emptying).
	PerDay float64
	// DaysLeft is Free / PerDay; -1 when the pool is not filling up.
	DaysLeft float64
}

// fleetWindow is the span of the forecast's usage history, in days.
const fleetWindow = 30

// Fleet reads the wallboard's summary. The counts are read from
// fleet_counts and the conflicts through the binding-class indexes
// (migration 23: both kept by triggers on every write), so the cost does
// not grow with the fleet; the forecasts read each pool's per-day usage
// roll-up, not its allocations.
//
// pools are the pools as the caller has just read them (ListPools), so a
// page that also draws pool bars reads the pools' counts once.
func (c *Console) Fleet(ctx context.Context, pools []allocator.Pool, recent int) (*Fleet, error) {
	f := &Fleet{HostsByState: map[string]int64{allocator.StateReady: 0, allocator.StateDecommissioned: 0}, Bindings: map[string]int64{}}
	for _, s := range []string{allocator.BindingReserved, allocator.BindingAutomatic, allocator.BindingPending, allocator.BindingConflict, allocator.BindingMissing, allocator.BindingNone} {
		f.Bindings[s] = 0
	}
	if err := c.read(ctx, f.count); err != nil {
		return nil, err
	}
	if recent > 0 {
		// The first DPUs in conflict by machine_id, read through the
		// binding-class indexes (allocator.ListBindings).
		page, err := c.a.ListBindings(ctx, allocator.BindingFilter{Status: allocator.BindingConflict, Limit: recent})
		if err != nil {
			return nil, err
		}
		f.Conflicts = page.Items
	}
	page, err := audit.ListEvents(ctx, c.db, audit.EventFilter{Action: "machine.force_delete", Limit: recent * 4})
	if err != nil {
		return nil, err
	}
	// One event per machine of a force delete (host and DPUs): keep the
	// host's, the one that carries the impact.
	for _, e := range page.Items {
		if len(f.ForceDeletes) < recent && string(e.After) != "null" {
			f.ForceDeletes = append(f.ForceDeletes, e)
		}
	}
	for _, p := range pools {
		fc, err := c.forecast(ctx, p)
		if err != nil {
			return nil, err
		}
		f.Forecasts = append(f.Forecasts, fc)
	}
	sort.SliceStable(f.Forecasts, func(i, j int) bool {
		x, y := f.Forecasts[i], f.Forecasts[j]
		if (x.DaysLeft >= 0) != (y.DaysLeft >= 0) {
			return x.DaysLeft >= 0
		}
		if x.DaysLeft >= 0 && x.DaysLeft != y.DaysLeft {
			return x.DaysLeft < y.DaysLeft
		}
		return x.Used > y.Used
	})
	return f, nil
}

// count fills the host, DPU and binding counts from fleet_counts (kept by
// triggers: one short read whatever the fleet's size).
func (f *Fleet) count(db *gorm.DB) error {
	hasPool, err := allocator.LoopbackPoolsExist(db)
	if err != nil {
		return err
	}
	var cs []struct {
		Kind, State, BindingV4, BindingV6 string
		N                                 int64
	}
	// Through the primary key (kind first): each machine write updates a
	// row of this small table, so after an ingestion of the fleet its file
	// holds thousands of pages, nearly all empty, that a sequential scan
	// would read on every refresh (machines.kind is host or dpu).
	if err := db.Raw(`SELECT kind, state, binding_v4, binding_v6, n FROM fleet_counts WHERE kind IN (?, ?) AND n <> 0`,
		allocator.KindHost, allocator.KindDPU).Scan(&cs).Error; err != nil {
		return err
	}
	for _, r := range cs {
		if r.Kind == allocator.KindHost {
			f.HostsByState[r.State] += r.N
			f.Hosts += r.N
			continue
		}
		v4 := allocator.BindingClassStatus(r.BindingV4, hasPool[allocator.PoolLoopbackV4])
		v6 := allocator.BindingClassStatus(r.BindingV6, hasPool[allocator.PoolLoopbackV6])
		f.DPUs += r.N
		f.Bindings[v4] += r.N
		f.Bindings[v6] += r.N
		if incomplete(v4) || incomplete(v6) {
			f.DPUsIncomplete += r.N
		} else {
			f.DPUsComplete += r.N
		}
	}
	return nil
}

// BindingCounts is the number of DPU families in each binding status
// (the NOC's counts, without the rest of the fleet summary).
func (c *Console) BindingCounts(ctx context.Context) (map[string]int64, error) {
	f := &Fleet{HostsByState: map[string]int64{}, Bindings: map[string]int64{}}
	if err := c.read(ctx, f.count); err != nil {
		return nil, err
	}
	return f.Bindings, nil
}

// incomplete: a family whose pool exists but that has no value.
func incomplete(status string) bool {
	return status == allocator.BindingMissing || status == allocator.BindingConflict
}

func (c *Console) forecast(ctx context.Context, p allocator.Pool) (PoolForecast, error) {
	fc := PoolForecast{Pool: p, Used: p.Stats.Used(), ExplicitUsed: -1, DaysLeft: -1}
	free := new(big.Int)
	for _, c := range []allocator.Counts{p.Stats.Auto, p.Stats.Explicit} {
		if n, ok := new(big.Int).SetString(c.Free, 10); ok {
			free.Add(free, n)
		}
	}
	fc.Free = free.String()
	if sz, ok := new(big.Float).SetString(p.Stats.Explicit.Size); ok && sz.Sign() > 0 {
		fr, _ := new(big.Float).SetString(p.Stats.Explicit.Free)
		if fr == nil {
			fr = new(big.Float)
		}
		used := new(big.Float).Sub(sz, fr)
		r, _ := new(big.Float).Quo(used, sz).Float64()
		fc.ExplicitUsed = r
	}
	usage, err := c.PoolUsageOf(ctx, &p, fleetWindow)
	if err != nil {
		return fc, err
	}
	first, last := usage[0], usage[len(usage)-1]
	delta := float64((last.Allocated + last.Quarantined) - (first.Allocated + first.Quarantined))
	fc.PerDay = delta / float64(len(usage)-1)
	if fc.PerDay > 0 {
		fl, _ := new(big.Float).SetInt(free).Float64()
		fc.DaysLeft = math.Floor(fl / fc.PerDay)
	}
	return fc, nil
}
