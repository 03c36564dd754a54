package dbcheck

import (
	"sort"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/models"
)

// The value rules of Check: one pass over the pools and their ranges, and
// one ordered pass over every allocation, which checks a value's stored
// forms, its range, its neighbour's run_end flag and recounts the ranges.
// Values are compared by their sort keys once allocator.PoolValues'
// StoredForm has accepted them: a fixed width makes byte order value
// order.

type checkPool struct {
	models.Pool
	vals   allocator.PoolValues
	ranges []*checkRange // sorted by first value
	// held: the values of a reservation pool that an allocation holds
	// (any state), filled by the allocation pass
	held map[string]bool
}

type checkRange struct {
	models.PoolRange
	ok          bool // its keys name its values
	allocated   int64
	quarantined int64
	// reservedUnheld: ExpectedDpu reservations in the range that no
	// allocation of the pool holds
	reservedUnheld int64
}

func checkPoolsAndRanges(c *checker) error {
	var pools []models.Pool
	if err := c.q.Raw(`SELECT * FROM pools ORDER BY id`).Scan(&pools).Error; err != nil {
		return err
	}
	c.pools, c.byName = map[int64]*checkPool{}, map[string]*checkPool{}
	for i := range pools {
		p := &checkPool{Pool: pools[i], vals: allocator.PoolValuesOf(&pools[i])}
		if reservationKeys[p.Name] != "" {
			p.held = map[string]bool{}
		}
		c.pools[p.ID], c.byName[p.Name] = p, p
	}
	var ranges []models.PoolRange
	if err := c.q.Raw(`SELECT * FROM pool_ranges ORDER BY pool_id, first_key, id`).Scan(&ranges).Error; err != nil {
		return err
	}
	for i := range ranges {
		r := &checkRange{PoolRange: ranges[i]}
		p := c.pools[r.PoolID]
		if p == nil {
			c.add("stored_values", "range %d belongs to pool id %d, which does not exist", r.ID, r.PoolID)
			continue
		}
		if !p.vals.StoredForm(r.FirstKey, r.FirstValue) || !p.vals.StoredForm(r.LastKey, r.LastValue) {
			c.add("stored_values", "pool %q: range %d (%s..%s) has keys %s..%s that do not name its values", p.Name, r.ID, r.FirstValue, r.LastValue, r.FirstKey, r.LastKey)
			continue
		}
		r.ok = true
		if r.FirstKey > r.LastKey {
			c.add("range_order", "pool %q: range %d starts at %s, above its last value %s", p.Name, r.ID, r.FirstValue, r.LastValue)
		}
		p.ranges = append(p.ranges, r)
	}
	for _, p := range pools {
		cp := c.pools[p.ID]
		var prev *checkRange
		for _, r := range cp.ranges {
			if prev != nil && r.FirstKey <= prev.LastKey {
				c.add("ranges_disjoint", "pool %q: range %s..%s overlaps range %s..%s", p.Name, r.FirstValue, r.LastValue, prev.FirstValue, prev.LastValue)
			}
			if prev == nil || r.LastKey > prev.LastKey {
				prev = r
			}
		}
	}
	overlaps, err := allocator.PoolOverlaps(c.q)
	if err != nil {
		return err
	}
	for _, o := range overlaps {
		c.add("pools_disjoint", "%s", o.Message())
	}
	return nil
}

// checkAllocations walks every allocation in (pool, value) order.
func checkAllocations(c *checker) error {
	rows, err := c.q.Raw(`SELECT pool_id, value_key, value, state, run_end FROM allocations ORDER BY pool_id, value_key`).Rows()
	if err != nil {
		return err
	}
	defer rows.Close()
	type held struct {
		pool   *checkPool
		key    string
		value  string
		runEnd bool
		ok     bool
	}
	var prev *held
	ri := 0 // index of the first range of prev's pool not below the value
	closeRun := func(next *held) {
		if prev == nil || !prev.ok {
			return
		}
		nextHeld := false
		if next != nil && next.pool == prev.pool && next.ok {
			if n, ok := prev.pool.vals.NextKey(prev.key); ok && n == next.key {
				nextHeld = true
			}
			if next.key == prev.key {
				return // a duplicate: value_held_once names it
			}
		}
		if prev.runEnd == nextHeld {
			state := "not held"
			if nextHeld {
				state = "held"
			}
			c.add("run_end", "pool %q: %s has run_end %t but the next value is %s", prev.pool.Name, prev.value, prev.runEnd, state)
		}
	}
	for rows.Next() {
		var (
			poolID          int64
			key, val, state string
			runEnd          bool
		)
		if err := rows.Scan(&poolID, &key, &val, &state, &runEnd); err != nil {
			return err
		}
		p := c.pools[poolID]
		if p == nil {
			c.add("stored_values", "allocation %s belongs to pool id %d, which does not exist", val, poolID)
			continue
		}
		h := &held{pool: p, key: key, value: val, runEnd: runEnd}
		if p.held != nil {
			p.held[key] = true
		}
		h.ok = p.vals.StoredForm(key, val)
		if !h.ok {
			c.add("stored_values", "pool %q: allocation %q has the key %s, which does not name it", p.Name, val, key)
		}
		closeRun(h)
		if prev == nil || prev.pool != p {
			ri = 0
		}
		prev = h
		if !h.ok {
			continue
		}
		for ri < len(p.ranges) && (!p.ranges[ri].ok || p.ranges[ri].LastKey < h.key) {
			ri++
		}
		// Ranges sorted by first value: the first one whose last value is
		// not below v is the only candidate unless ranges overlap, which
		// ranges_disjoint reports.
		var in *checkRange
		for j := ri; j < len(p.ranges) && p.ranges[j].FirstKey <= h.key; j++ {
			if p.ranges[j].ok && p.ranges[j].LastKey >= h.key {
				in = p.ranges[j]
				break
			}
		}
		if in == nil {
			c.add("allocation_in_range", "pool %q: %s (%s) lies in no range of the pool", p.Name, val, state)
			continue
		}
		if state == models.StateQuarantined {
			in.quarantined++
		} else {
			in.allocated++
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	closeRun(nil)
	return checkRangeCounts(c)
}

// reservationKeys names, per reservation pool, the expected_dpus column
// whose keys reserve its values.
var reservationKeys = map[string]string{allocator.PoolLoopbackV4: "loopback_ip_key", allocator.PoolLoopbackV6: "loopback_ip_v6_key"}

// countUnheldReservations counts, per range of each reservation pool, the
// reserved keys that no allocation of the pool holds (in every range that
// holds the key: overlapping ranges are ranges_disjoint's finding).
func countUnheldReservations(c *checker) error {
	for _, name := range []string{allocator.PoolLoopbackV4, allocator.PoolLoopbackV6} {
		if p := c.byName[name]; p != nil && len(p.ranges) > 0 {
			if err := countUnheldIn(c, p, reservationKeys[name]); err != nil {
				return err
			}
		}
	}
	return nil
}

// countUnheldIn counts the keys of column col of expected_dpus on the
// ranges of p that hold them, unless an allocation of p holds them.
func countUnheldIn(c *checker, p *checkPool, col string) error {
	rows, err := c.q.Raw(`SELECT ` + col + ` FROM expected_dpus WHERE ` + col + ` IS NOT NULL`).Rows()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return err
		}
		if p.held[k] {
			continue
		}
		for _, r := range p.ranges {
			if r.FirstKey <= k && k <= r.LastKey {
				r.reservedUnheld++
			}
		}
	}
	return rows.Err()
}

func checkRangeCounts(c *checker) error {
	if err := countUnheldReservations(c); err != nil {
		return err
	}
	type count struct {
		RangeID        int64
		Allocated      int64
		Quarantined    int64
		ReservedUnheld int64
	}
	var counts []count
	if err := c.q.Raw(`SELECT range_id, allocated, quarantined, reserved_unheld FROM range_counts`).Scan(&counts).Error; err != nil {
		return err
	}
	stored := map[int64]count{}
	for _, k := range counts {
		stored[k.RangeID] = k
	}
	ids := make([]int64, 0, len(c.pools))
	for id := range c.pools {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	seen := map[int64]bool{}
	for _, id := range ids {
		p := c.pools[id]
		for _, r := range p.ranges {
			seen[r.ID] = true
			k, ok := stored[r.ID]
			switch {
			case !ok:
				c.add("range_counts", "pool %q: range %s..%s has no range_counts row (recount: %d allocated, %d quarantined, %d reserved and not held)",
					p.Name, r.FirstValue, r.LastValue, r.allocated, r.quarantined, r.reservedUnheld)
			case k.Allocated != r.allocated || k.Quarantined != r.quarantined:
				c.add("range_counts", "pool %q: range %s..%s counts %d allocated, %d quarantined; a recount finds %d and %d",
					p.Name, r.FirstValue, r.LastValue, k.Allocated, k.Quarantined, r.allocated, r.quarantined)
			}
			if ok && k.ReservedUnheld != r.reservedUnheld {
				c.add("range_counts", "pool %q: range %s..%s counts %d reserved values no allocation holds; a recount finds %d",
					p.Name, r.FirstValue, r.LastValue, k.ReservedUnheld, r.reservedUnheld)
			}
		}
	}
	for _, k := range counts {
		if !seen[k.RangeID] {
			var n int64
			if err := c.q.Raw(`SELECT COUNT(*) FROM pool_ranges WHERE id = ?`, k.RangeID).Scan(&n).Error; err != nil {
				return err
			}
			if n == 0 {
				c.add("range_counts", "range_counts has a row for range %d, which does not exist", k.RangeID)
			}
		}
	}
	return nil
}
