package allocator

import (
	"fmt"

	"github.com/ipledger/ipledger/models"
)

// The write half of set-based ingestion (ingest_bulk.go): the loopbacks
// of the planned DPUs, then their machine rows, network configs and audit
// events, each kind in one multi-row statement.

// assignBulk gives the planned DPUs their loopbacks, pool by pool: first
// the reservations, each checked free in one query for the whole batch
// (a plan whose reserved value is taken moves to later, for ingestReport
// to explain), then the automatic values of the remaining plans in their
// order, from one lowest-free search per pool. It returns the plans kept.
func (t *tx) assignBulk(pools map[string]*models.Pool, site *bulkSite, plans []*bulkPlan) ([]*bulkPlan, []int, error) {
	type cand struct {
		plan *bulkPlan
		dpu  *bulkDPU
		fam  *bulkFamily
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
	// Pass 1: expired quarantines go first (as every allocation does), then
	// the reservations that are not free take their plans out.
	dropped := map[*bulkPlan]bool{}
	taken := map[string]map[string]bool{} // pool → value keys stored
	for _, f := range loopbackFamilies {
		cs := byPool[f.pool]
		if len(cs) == 0 {
			continue
		}
		p := pools[f.pool]
		if err := t.purgeExpired(p); err != nil {
			return nil, nil, err
		}
		sp := spaceOf(p)
		var keys []string
		for _, c := range cs {
			if c.fam.reserved != nil {
				keys = append(keys, c.fam.reserved.key())
				if n, ok := sp.next(*c.fam.reserved); ok {
					keys = append(keys, n.key())
				}
			}
		}
		taken[f.pool] = map[string]bool{}
		if len(keys) == 0 {
			continue
		}
		var stored []string
		if err := t.Model(&models.Allocation{}).Where("pool_id = ? AND value_key IN ?", p.ID, keys).Pluck("value_key", &stored).Error; err != nil {
			return nil, nil, err
		}
		for _, k := range stored {
			taken[f.pool][k] = true
		}
		for _, c := range cs {
			if c.fam.reserved != nil && taken[f.pool][c.fam.reserved.key()] {
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
	// Pass 2: insert, per pool, the reservations and then the automatic
	// values (whose search sees the reservations already stored).
	for _, f := range loopbackFamilies {
		var resv, auto []cand
		for _, c := range byPool[f.pool] {
			switch {
			case dropped[c.plan]:
			case c.fam.reserved != nil:
				resv = append(resv, c)
			default:
				auto = append(auto, c)
			}
		}
		p := pools[f.pool]
		if len(resv) > 0 {
			sp := spaceOf(p)
			inBatch := make(map[u128]bool, len(resv))
			for _, c := range resv {
				inBatch[*c.fam.reserved] = true
			}
			rows := make([]models.Allocation, len(resv))
			var prevs []string
			for k, c := range resv {
				v := *c.fam.reserved
				runEnd := true
				if n, ok := sp.next(v); ok {
					runEnd = !taken[f.pool][n.key()] && !inBatch[n]
				}
				if pv, ok := sp.prev(v); ok && !inBatch[pv] {
					prevs = append(prevs, pv.key())
				}
				rows[k] = models.Allocation{PoolID: p.ID, ValueKey: v.key(), Value: sp.format(v), State: models.StateAllocated,
					OwnerType: strp(OwnerTypeMachine), OwnerID: strp(c.dpu.row.MachineID), RunEnd: runEnd, AllocatedAt: t.now}
			}
			if err := t.insertBulkAllocations(p, rows, prevs); err != nil {
				return nil, nil, err
			}
			for k, c := range resv {
				if err := c.fam.took(t, c.plan, &rows[k]); err != nil {
					return nil, nil, err
				}
			}
		}
		if len(auto) == 0 {
			continue
		}
		picks, err := t.lowestFreeN(p, len(auto))
		if err != nil {
			return nil, nil, err
		}
		reqs := make([]autoOwner, len(auto))
		fresh := make([]int, len(auto))
		for k, c := range auto {
			reqs[k] = autoOwner{ctx: c.plan.item.ctx, owner: Owner{Type: OwnerTypeMachine, ID: c.dpu.row.MachineID}}
			fresh[k] = k
		}
		rows, prevs, _, err := newAllocations(p, reqs, fresh, picks, t.now)
		if err != nil {
			return nil, nil, err
		}
		if len(rows) > 0 {
			if err := t.insertBulkAllocations(p, rows, prevs); err != nil {
				return nil, nil, err
			}
		}
		for k, c := range auto {
			if k < len(rows) {
				if err := c.fam.took(t, c.plan, &rows[k]); err != nil {
					return nil, nil, err
				}
				continue
			}
			c.fam.problem = &Incomplete{Code: CodePoolExhausted, Message: fmt.Sprintf("DPU %s: pool %q has no free value in its auto_assign ranges", c.dpu.serial, p.Name)}
		}
	}
	return kept, later, nil
}

// took records that the family got row, with its allocation.create event
// by the plan's actor.
func (bf *bulkFamily) took(t *tx, pl *bulkPlan, row *models.Allocation) error {
	ev, err := auditEvent(pl.item.ctx, t.now, "allocation.create", "allocation", bf.p.Name+"/"+row.Value, nil, allocationOut(bf.p.Name, row))
	if err != nil {
		return bulkMachineAuditErr(err, pl.idx)
	}
	bf.row, bf.event, bf.value = row, &ev, strp(row.Value)
	t.changed(bf.p.Name, "allocate")
	return nil
}

// insertBulkAllocations stores rows of p and clears the run-end flag of
// the stored values in prevs (a no-op where free).
func (t *tx) insertBulkAllocations(p *models.Pool, rows []models.Allocation, prevs []string) error {
	if err := t.Create(&rows).Error; err != nil {
		return err
	}
	if len(prevs) == 0 {
		return nil
	}
	return t.Exec(`UPDATE allocations SET run_end = ? WHERE pool_id = ? AND run_end AND value_key IN ?`, false, p.ID, prevs).Error
}

// writeBulk stores the new machines and network configs of plans and
// every audit event, in the order ingestReport would write them: per
// report the host, then per DPU its creation and per family the
// allocation and the network-config update that names it.
func (t *tx) writeBulk(plans []*bulkPlan) error {
	var hosts, dpus []models.Machine
	var ncs []models.NetworkConfig
	var events []models.AuditEvent
	add := func(pl *bulkPlan, action, objType, objID string, before, after any) error {
		ev, err := auditEvent(pl.item.ctx, t.now, action, objType, objID, before, after)
		if err != nil {
			return bulkMachineAuditErr(err, pl.idx)
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
	// Hosts before their DPUs: a DPU row refers to its host's.
	for _, batch := range []any{&hosts, &dpus, &ncs, &events} {
		if err := createAll(t, batch); err != nil {
			return err
		}
	}
	return nil
}

// createAll inserts a slice of rows in one statement (nothing when empty).
func createAll(t *tx, rows any) error {
	n := 0
	switch r := rows.(type) {
	case *[]models.Machine:
		n = len(*r)
	case *[]models.NetworkConfig:
		n = len(*r)
	case *[]models.AuditEvent:
		n = len(*r)
	}
	if n == 0 {
		return nil
	}
	return t.Create(rows).Error
}

// bulkResults answers each plan as ingestReport would: its host with its
// DPUs and their network configs, and the families left unassigned.
func (t *tx) bulkResults(plans []*bulkPlan) (map[int]*IngestResult, error) {
	top := make([]models.Machine, len(plans))
	for i, pl := range plans {
		top[i] = *pl.host
	}
	ms, err := t.a.machinesOut(t.ctx, t.DB, top)
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
