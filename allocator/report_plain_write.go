package allocator

import (
	"fmt"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

// The write half of set-based ingestion (report_plain.go): the loopbacks
// of the planned DPUs, then their machine rows, network configs and audit
// events, each kind in one multi-row statement.

// assignPlain gives the planned DPUs their loopbacks, pool by pool: first
// the reservations, each checked free in one query for the whole batch
// (a plan whose reserved value is taken moves to later, for ingestReport
// to explain), then the automatic values of the remaining plans in their
// order, from one lowest-free search per pool. It returns the plans kept.
func (t *tx) assignPlain(pools map[string]*models.Pool, site *plainSite, plans []*plainPlan, w *plainWrites) ([]*plainPlan, []int, error) {
	type cand struct {
		plan *plainPlan
		dpu  *plainDPU
		fam  *plainFamily
	}
	byPool := map[string][]cand{}
	for _, pl := range plans {
		for _, d := range pl.dpus {
			for _, bf := range d.fams {
				if bf.reserved != nil || bf.auto {
					byPool[bf.f.pool] = append(byPool[bf.f.pool], cand{pl, d, bf})
				}
			}
		}
	}
	// Pass 1: a pool with a quarantine whose hold ran out sends every plan
	// to ingestReport, then the reservations that are not free take their
	// plans out. The first report that allocates from the pool frees the
	// quarantine (purgeExpired) and writes its audit event between its own,
	// under its own actor; freeing it here would put the event before the
	// batch's and under the batch's first caller.
	var keyPools []int64
	var keyVals []string
	for _, f := range loopbackFamilies {
		cs := byPool[f.pool]
		if len(cs) == 0 {
			continue
		}
		p := pools[f.pool]
		if expired, err := t.hasExpired(p); err != nil || expired {
			var all []int
			for _, pl := range plans {
				all = append(all, pl.idx)
			}
			return nil, all, err
		}
		sp := spaceOf(p)
		for _, c := range cs {
			if c.fam.reserved != nil {
				keyPools, keyVals = append(keyPools, p.ID), append(keyVals, c.fam.reserved.key())
				if n, ok := sp.next(*c.fam.reserved); ok {
					keyPools, keyVals = append(keyPools, p.ID), append(keyVals, n.key())
				}
			}
		}
	}
	taken, err := t.storedValues(keyPools, keyVals)
	if err != nil {
		return nil, nil, err
	}
	dropped := map[*plainPlan]bool{}
	for _, cs := range byPool {
		for _, c := range cs {
			if c.fam.reserved != nil && taken[c.fam.p.ID][c.fam.reserved.key()] {
				dropped[c.plan] = true
			}
		}
	}
	var later []int
	kept := plans[:0:0]
	for _, pl := range plans {
		if dropped[pl] {
			later = append(later, pl.idx)
		} else {
			kept = append(kept, pl)
		}
	}
	// Pass 2: the automatic values (one search per pool, which reads the
	// ranges of both pools at once), then every new row of both pools in
	// one INSERT and the run ends they close in one UPDATE.
	resv, auto := map[string][]cand{}, map[string][]cand{}
	var autoPools []*models.Pool
	for _, f := range loopbackFamilies {
		for _, c := range byPool[f.pool] {
			switch {
			case dropped[c.plan]:
			case c.fam.reserved != nil:
				resv[f.pool] = append(resv[f.pool], c)
			default:
				auto[f.pool] = append(auto[f.pool], c)
			}
		}
		if len(auto[f.pool]) > 0 {
			autoPools = append(autoPools, pools[f.pool])
		}
	}
	ranges, err := t.autoRangesOf(autoPools)
	if err != nil {
		return nil, nil, err
	}
	var rows []models.Allocation
	var owners []cand
	for _, f := range loopbackFamilies {
		p := pools[f.pool]
		if p == nil || len(resv[f.pool])+len(auto[f.pool]) == 0 {
			continue
		}
		sp := spaceOf(p)
		var picks []freePick
		if n := len(auto[f.pool]); n > 0 {
			if picks, err = pickFree(p, n, ranges[p.ID], gormGaps{t: t, p: p}); err != nil {
				return nil, nil, err
			}
		}
		first := len(rows)
		inBatch := map[u128]bool{}
		for _, c := range resv[f.pool] {
			inBatch[*c.fam.reserved] = true
		}
		for _, pk := range picks {
			inBatch[pk.v] = true
		}
		add := func(c cand, v u128, runEnd bool) {
			if n, ok := sp.next(v); ok && (taken[p.ID][n.key()] || inBatch[n]) {
				runEnd = false
			}
			rows = append(rows, models.Allocation{PoolID: p.ID, ValueKey: v.key(), Value: sp.format(v), State: models.StateAllocated,
				OwnerType: strp(OwnerTypeMachine), OwnerID: strp(c.dpu.row.MachineID), RunEnd: runEnd, AllocatedAt: t.now})
			owners = append(owners, c)
		}
		for _, c := range resv[f.pool] {
			add(c, *c.fam.reserved, true)
		}
		for k, pk := range picks {
			add(auto[f.pool][k], pk.v, pk.runEnd)
		}
		for _, c := range auto[f.pool][len(picks):] {
			c.fam.problem = &Incomplete{Code: fault.CodePoolExhausted, Message: fmt.Sprintf("DPU %s: pool %q has no free value in its auto_assign ranges", c.dpu.serial, p.Name)}
		}
		for _, r := range rows[first:] {
			v, err := parseKey(r.ValueKey)
			if err != nil {
				return nil, nil, err
			}
			if pv, ok := sp.prev(v); ok && !inBatch[pv] {
				w.prevPools = append(w.prevPools, p.ID)
				w.prevKeys = append(w.prevKeys, pv.key())
			}
		}
	}
	w.allocations = rows
	for k, c := range owners {
		if err := c.fam.took(t, c.plan, &rows[k]); err != nil {
			return nil, nil, err
		}
	}
	return kept, later, nil
}

// autoRangesOf reads the auto_assign ranges of pools, each with the gap
// columns from its first value (autoRangesQuery for several pools), in one
// query.
func (t *tx) autoRangesOf(pools []*models.Pool) (map[int64][]rangeGap, error) {
	out := map[int64][]rangeGap{}
	if len(pools) == 0 {
		return out, nil
	}
	ids := make([]int64, len(pools))
	for i, p := range pools {
		ids[i] = p.ID
	}
	rows, err := t.Raw(`SELECT r.pool_id, r.first_key, r.last_key, `+gapColumns("r.pool_id", "r.first_key")+
		` FROM pool_ranges r WHERE r.pool_id IN ? AND r.auto_assign = ? ORDER BY r.pool_id, r.first_key`, ids, true).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var r rangeGap
		if err := rows.Scan(&id, &r.first, &r.last, &r.cols[0], &r.cols[1], &r.cols[2]); err != nil {
			return nil, err
		}
		out[id] = append(out[id], r)
	}
	return out, rows.Err()
}

// took records that the family got row, with its allocation.create event
// by the plan's actor.
func (bf *plainFamily) took(t *tx, pl *plainPlan, row *models.Allocation) error {
	ev, err := allocationCreateEvent(pl.item.ctx, t.now, bf.p.Name, row)
	if err != nil {
		return plainMachineAuditErr(err, pl.idx)
	}
	bf.row, bf.event, bf.value = row, &ev, strp(row.Value)
	t.changed(bf.p.Name, "allocate")
	return nil
}

// writePlain stores the new machines and network configs of plans and
// every audit event, in the order ingestReport would write them: per
// report the host, then per DPU its creation and per family the
// allocation and the network-config update that names it.
func (t *tx) writePlain(plans []*plainPlan, w *plainWrites) error {
	var hosts, dpus []models.Machine
	ncs := w.ncs
	events := w.events
	add := func(pl *plainPlan, action, objType, objID string, before, after any) error {
		ev, err := audit.NewRow(pl.item.ctx, t.now, action, objType, objID, before, after)
		if err != nil {
			return plainMachineAuditErr(err, pl.idx)
		}
		events = append(events, ev)
		return nil
	}
	for _, pl := range plans {
		if pl.newHost {
			pl.host.CreatedAt, pl.host.UpdatedAt = t.now, t.now
			hosts = append(hosts, *pl.host)
			if err := add(pl, "machine.create", "machine", pl.host.MachineID, nil, machineAudit(pl.host)); err != nil {
				return err
			}
		}
		for _, d := range pl.dpus {
			if !d.isNew {
				continue
			}
			d.row.CreatedAt, d.row.UpdatedAt = t.now, t.now
			dpus = append(dpus, *d.row)
			if err := add(pl, "machine.create", "machine", d.row.MachineID, nil, machineAudit(d.row)); err != nil {
				return err
			}
			nc := models.NetworkConfig{MachineID: d.row.MachineID, Version: 1, UpdatedAt: t.now}
			for _, bf := range d.fams {
				if bf.event != nil {
					events = append(events, *bf.event)
				}
				if bf.value == nil {
					continue
				}
				before := map[string]any{"loopback_ip": nc.LoopbackIP, "loopback_ip_v6": nc.LoopbackIPv6, "version": nc.Version}
				if bf.f.name == FamilyIPv4 {
					nc.LoopbackIP = bf.value
				} else {
					nc.LoopbackIPv6 = bf.value
				}
				nc.Version++
				after := map[string]any{"loopback_ip": nc.LoopbackIP, "loopback_ip_v6": nc.LoopbackIPv6, "version": nc.Version}
				if err := add(pl, "network_config.update", "machine", nc.MachineID, before, after); err != nil {
					return err
				}
			}
			ncs = append(ncs, nc)
		}
	}
	// Hosts first: a DPU row refers to its host's, which both databases
	// check at the end of the statement.
	w.machines, w.ncs, w.events = append(hosts, dpus...), ncs, events
	return t.flushPlain(w)
}

// plainResults answers each plan as ingestReport would: its host with its
// DPUs and their network configs, and the families left unassigned.
func (t *tx) plainResults(plans []*plainPlan) (map[int]*IngestResult, error) {
	top := make([]models.Machine, len(plans))
	for i, pl := range plans {
		top[i] = *pl.host
	}
	ms, err := t.a.MachinesOf(t.ctx, t.DB, top)
	if err != nil {
		return nil, err
	}
	out := make(map[int]*IngestResult, len(plans))
	for i, pl := range plans {
		res := &IngestResult{Machines: []Machine{ms[i]}, Incomplete: []Incomplete{}}
		for _, d := range pl.dpus {
			for _, bf := range d.fams {
				if bf.problem != nil {
					inc := *bf.problem
					inc.MachineID, inc.Family = d.row.MachineID, bf.f.name
					res.Incomplete = append(res.Incomplete, inc)
				}
			}
		}
		out[pl.idx] = res
	}
	return out, nil
}
