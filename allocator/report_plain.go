package allocator

import (
	"context"
	"fmt"
	"strings"

	"github.com/ipledger/ipledger/models"
)

// Set-based ingestion of a batch of reports (docs/decisions.md "Plain
// reports are ingested set-based").
//
// Most reports of a bring-up are of the two plainest kinds: a host and
// DPUs the site has never seen, whose loopbacks are their reservations or
// automatic values, and a report repeated by site-explorer that changes
// nothing. Run one after the other, such a report costs about forty
// statements, all while lo-ip and lo-ip-v6 are locked. ingestPlain reads
// what every report of the batch needs in a few queries, decides each
// plain report in memory exactly as ingestReport would, and writes them
// all in a few multi-row statements; any report with something unusual
// (a decommissioned or moved machine, a DPU declared by another
// ExpectedMachine, a quarantine, a reservation that is not free, a
// changed host, a network config that disagrees with the pool) is left
// to ingestReport, which the caller runs after the plain ones; so are all
// of them when a pool they allocate from holds a quarantine whose hold
// ran out. The batch therefore equals running its plain reports in
// arrival order, then the others in arrival order.

// plainItem is one report of a batch with its caller's context (actor and
// request id of its audit events).
type plainItem struct {
	ctx context.Context
	r   *report
}

// plainSite is what the reports of a batch find stored, read in one query
// per table.
type plainSite struct {
	ems      map[string]*models.ExpectedMachine // by lower-case BMC MAC
	machines map[string]*models.Machine         // by machine_id
	macOwner map[string]string                  // machine_id by BMC MAC, of every machine read
	decls    map[string]*models.ExpectedDPU     // by serial
	ncs      map[string]*models.NetworkConfig   // by DPU machine_id
	held     map[string]map[string]*models.Allocation
	odd      map[string]bool // DPU machine_ids with a quarantined or unheld row in a loopback pool
	ranges   map[int64][]models.PoolRange
}

// plainFamily is one family of one planned DPU.
type plainFamily struct {
	f        loopbackFamily
	p        *models.Pool
	value    *string // decided value (nil: unassigned or not yet picked)
	reserved *u128   // the reservation to insert
	auto     bool    // an automatic value to pick
	row      *models.Allocation
	event    *models.AuditEvent // allocation.create of row
	problem  *Incomplete
}

// plainDPU is one planned DPU of a report.
type plainDPU struct {
	serial string
	row    *models.Machine // new (create) or stored
	isNew  bool
	fams   []*plainFamily
}

// plainPlan is one plain report.
type plainPlan struct {
	item    plainItem
	idx     int
	host    *models.Machine
	newHost bool
	dpus    []*plainDPU
}

// ingestPlain ingests the plain reports of items (see above) and returns
// their results by position, and the positions of the others, in order,
// for the caller to run with ingestReport.
func (t *tx) ingestPlain(pools map[string]*models.Pool, items []plainItem) (map[int]*IngestResult, []int, error) {
	site, err := t.readPlainSite(pools, items)
	if err != nil {
		return nil, nil, err
	}
	var plans []*plainPlan
	var rest []int
	seen := map[string]bool{}
	for i, it := range items {
		if p := site.plan(pools, it, i, seen); p != nil {
			plans = append(plans, p)
		} else {
			rest = append(rest, i)
		}
	}
	if len(plans) == 0 {
		return map[int]*IngestResult{}, rest, nil
	}
	w := &plainWrites{}
	plans, later, err := t.assignPlain(pools, site, plans, w)
	if err != nil {
		return nil, nil, err
	}
	rest = mergeSorted(rest, later)
	if len(plans) == 0 {
		return map[int]*IngestResult{}, rest, nil
	}
	if err := t.writePlain(plans, w); err != nil {
		return nil, nil, err
	}
	out, err := t.plainResults(plans)
	return out, rest, err
}

// readPlainSite reads the stored state every report of items depends on.
func (t *tx) readPlainSite(pools map[string]*models.Pool, items []plainItem) (*plainSite, error) {
	s := &plainSite{ems: map[string]*models.ExpectedMachine{}, machines: map[string]*models.Machine{}, macOwner: map[string]string{},
		decls: map[string]*models.ExpectedDPU{}, ncs: map[string]*models.NetworkConfig{},
		held: map[string]map[string]*models.Allocation{}, odd: map[string]bool{}, ranges: map[int64][]models.PoolRange{}}
	var macs, ids, bmcMACs, serials, dpuIDs []string
	for _, it := range items {
		macs = append(macs, strings.ToLower(it.r.mac))
		ids = append(ids, HostMachineID(it.r.mac))
		bmcMACs = append(bmcMACs, it.r.mac)
		for _, m := range it.r.dpuMACs {
			bmcMACs = append(bmcMACs, m)
		}
		for _, sn := range it.r.serials {
			serials = append(serials, sn)
			dpuIDs = append(dpuIDs, DPUMachineID(sn))
		}
	}
	ids = append(ids, dpuIDs...)
	var poolIDs []int64
	inPools := map[int64]bool{}
	for _, f := range loopbackFamilies {
		if p := pools[f.pool]; p != nil {
			poolIDs = append(poolIDs, p.ID)
			inPools[p.ID] = true
			s.held[f.pool] = map[string]*models.Allocation{}
		}
	}
	r, err := t.readPlain(macs, ids, bmcMACs, serials, dpuIDs, poolIDs)
	if err != nil {
		return nil, err
	}
	for i := range r.ems {
		s.ems[strings.ToLower(r.ems[i].BmcMacAddress)] = &r.ems[i]
	}
	for i := range r.machines {
		s.machines[r.machines[i].MachineID] = &r.machines[i]
		if m := r.machines[i].BmcMacAddress; m != nil {
			s.macOwner[*m] = r.machines[i].MachineID
		}
	}
	for i := range r.decls {
		s.decls[r.decls[i].SerialNumber] = &r.decls[i]
	}
	for i := range r.ncs {
		s.ncs[r.ncs[i].MachineID] = &r.ncs[i]
	}
	ours := make(map[string]bool, len(dpuIDs))
	for _, id := range dpuIDs {
		ours[id] = true
	}
	// Rows held by these DPUs, and quarantines held for them (in any pool:
	// the loopback pools are picked out here).
	for i := range r.owned {
		a := &r.owned[i]
		if !inPools[a.PoolID] {
			continue
		}
		if deref(a.FormerOwnerType) == OwnerTypeMachine && ours[deref(a.FormerOwnerID)] {
			s.odd[deref(a.FormerOwnerID)] = true
		}
		if deref(a.OwnerType) != OwnerTypeMachine || !ours[deref(a.OwnerID)] {
			continue
		}
		if a.State != models.StateAllocated {
			s.odd[deref(a.OwnerID)] = true
			continue
		}
		for _, f := range loopbackFamilies {
			if p := pools[f.pool]; p != nil && p.ID == a.PoolID {
				s.held[f.pool][deref(a.OwnerID)] = a
			}
		}
	}
	for _, pr := range r.ranges {
		s.ranges[pr.PoolID] = append(s.ranges[pr.PoolID], pr)
	}
	return s, nil
}

// plan decides report it of position idx in memory, or returns nil when
// it is not plain. seen holds the BMC MACs and serials of the reports
// planned before it: a report naming one of them again runs after them,
// one by one. It also holds the DPU BMC MACs of every report before it
// and the host BMC MACs of those not planned, so that a BMC MAC claimed
// by two reports of a batch goes to the first in arrival order.
func (s *plainSite) plan(pools map[string]*models.Pool, it plainItem, idx int, seen map[string]bool) *plainPlan {
	p := s.planReport(pools, it, idx, seen)
	r := it.r
	if p == nil {
		seen["nmac:"+r.mac] = true
	}
	for _, m := range r.dpuMACs {
		seen["dmac:"+m] = true
	}
	return p
}

func (s *plainSite) planReport(pools map[string]*models.Pool, it plainItem, idx int, seen map[string]bool) *plainPlan {
	r := it.r
	hostID := HostMachineID(r.mac)
	if seen["mac:"+r.mac] || seen["dmac:"+r.mac] {
		return nil
	}
	if o, ok := s.macOwner[r.mac]; ok && o != hostID {
		return nil // another machine's BMC MAC: ingestReport refuses it
	}
	for _, sn := range r.serials {
		if seen["dpu:"+sn] {
			return nil
		}
		if m := r.dpuMACs[sn]; m != "" && (seen["mac:"+m] || seen["dmac:"+m] || seen["nmac:"+m]) {
			return nil
		}
	}
	em := s.ems[strings.ToLower(r.mac)]
	chassis := r.chassis
	var emID *string
	if em != nil {
		emID = strp(em.ID)
		if chassis == "" {
			chassis = em.ChassisSerialNumber
		}
	}
	p := &plainPlan{item: it, idx: idx}
	if cur := s.machines[hostID]; cur != nil {
		if cur.State != StateReady || (chassis != "" && chassis != cur.ChassisSerialNumber) || deref(emID) != deref(cur.ExpectedMachineID) {
			return nil // refused (409) or updated: ingestReport
		}
		p.host = cur
	} else {
		p.host = &models.Machine{MachineID: hostID, Kind: KindHost, State: StateReady, BmcMacAddress: strp(r.mac),
			ChassisSerialNumber: chassis, ExpectedMachineID: emID, Version: 1}
		p.newHost = true
	}
	for _, sn := range r.serials {
		d := s.planDPU(pools, em, hostID, sn, r.dpuMACs[sn])
		if d == nil {
			return nil
		}
		p.dpus = append(p.dpus, d)
	}
	seen["mac:"+r.mac] = true
	for _, sn := range r.serials {
		seen["dpu:"+sn] = true
	}
	return p
}

// planDPU decides one DPU of a plain report, or nil when it is not plain.
// mac is the DPU's reported BMC MAC ("" when absent): a report that sets
// or changes a stored DPU's, or gives a new DPU one another machine has,
// is not plain.
func (s *plainSite) planDPU(pools map[string]*models.Pool, em *models.ExpectedMachine, hostID, serial, mac string) *plainDPU {
	id := DPUMachineID(serial)
	if o, ok := s.macOwner[mac]; mac != "" && ok && o != id {
		return nil
	}
	decl := s.decls[serial]
	if decl != nil && em != nil && decl.ExpectedMachineID != em.ID {
		return nil // perhaps misplaced (docs/reservations.md): ingestReport decides
	}
	if s.odd[id] {
		return nil // a quarantine of or for this DPU
	}
	d := &plainDPU{serial: serial}
	nc := s.ncs[id]
	if cur := s.machines[id]; cur != nil {
		if cur.Kind != KindDPU || cur.State != StateReady || deref(cur.HostMachineID) != hostID || nc == nil ||
			(mac != "" && mac != deref(cur.BmcMacAddress)) {
			return nil
		}
		d.row = cur
		// A known DPU is plain when it holds a value of every family and
		// its network config names them: the report changes nothing.
		for _, f := range loopbackFamilies {
			p := pools[f.pool]
			if p == nil {
				continue
			}
			h := s.held[f.pool][id]
			if h == nil || deref(f.active(nc)) != h.Value {
				return nil
			}
			d.fams = append(d.fams, &plainFamily{f: f, p: p, value: strp(h.Value)})
		}
		return d
	}
	if nc != nil {
		return nil
	}
	d.row = &models.Machine{MachineID: id, Kind: KindDPU, HostMachineID: strp(hostID), State: StateReady,
		SerialNumber: strp(serial), Version: 1}
	if mac != "" {
		d.row.BmcMacAddress = strp(mac)
	}
	d.isNew = true
	for _, f := range loopbackFamilies {
		p := pools[f.pool]
		if p == nil {
			continue
		}
		bf := &plainFamily{f: f, p: p}
		switch res := f.reserved(decl); {
		case s.held[f.pool][id] != nil:
			bf.value = strp(s.held[f.pool][id].Value)
		case res != nil:
			v, err := spaceOf(p).parse(*res)
			if err != nil || !s.inRequestableRange(p, v) {
				return nil // not available: ingestReport words why
			}
			bf.reserved = &v
		default:
			bf.auto = true
		}
		d.fams = append(d.fams, bf)
	}
	return d
}

// inRequestableRange tells whether v lies in an auto_assign=false range of
// p (the only ranges a value can be requested from).
func (s *plainSite) inRequestableRange(p *models.Pool, v u128) bool {
	k := v.key()
	for _, r := range s.ranges[p.ID] {
		if r.FirstKey <= k && k <= r.LastKey {
			return !r.AutoAssign
		}
	}
	return false
}

// mergeSorted merges two ascending lists of positions.
func mergeSorted(a, b []int) []int {
	out := make([]int, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		if j == len(b) || (i < len(a) && a[i] < b[j]) {
			out = append(out, a[i])
			i++
		} else {
			out = append(out, b[j])
			j++
		}
	}
	return out
}

// plainMachineAuditErr wraps an audit encoding error of report idx.
func plainMachineAuditErr(err error, idx int) error {
	return fmt.Errorf("report %d of a batch: %w", idx, err)
}
