package allocator

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/ipledger/ipledger/models"
)

// This file is the DPU lifecycle of DESIGN.md §4: ingestion (site-explorer
// reports and direct discovery), the one shared operation EnsureLoopbacks,
// reconciliation (startup and pool growth), decommission, delete and force
// delete. Every write runs in one transaction that first locks lo-ip and
// lo-ip-v6 (in name order) and only then touches machine rows, so that
// concurrent reports, deletes and ExpectedMachine edits never deadlock and
// a DPU is given one value per family however many reports race for it.

// ReportSpec is the body of POST /api/v1/site-explorer/reports: a host by
// its BMC MAC address with the serial numbers of its DPUs (any order).
type ReportSpec struct {
	BmcMacAddress       string      `json:"bmc_mac_address"`
	ChassisSerialNumber string      `json:"chassis_serial_number"`
	DPUs                []ReportDPU `json:"dpus"`
}

// ReportDPU is one DPU of a report.
type ReportDPU struct {
	SerialNumber string `json:"serial_number"`
}

// DiscoverSpec is the body of POST /api/v1/machines:discover: one DPU by
// serial number, optionally with its host's BMC MAC address.
type DiscoverSpec struct {
	SerialNumber      string `json:"serial_number"`
	HostBmcMacAddress string `json:"host_bmc_mac_address,omitempty"`
}

// Incomplete is a DPU family whose loopback could not be assigned now
// (DESIGN.md §10): code pool_exhausted, not_available (its reserved value
// is held, quarantined or outside the reserved range) or conflict (the DPU
// is declared by another ExpectedMachine than its host's). Reconciliation
// and pool growth complete it later; only families whose pool exists are
// listed.
type Incomplete struct {
	MachineID string `json:"machine_id"`
	Family    string `json:"family"`
	Code      Code   `json:"code"`
	Message   string `json:"message"`
}

// IngestResult answers a report or a discovery: 200 {"machines": [...],
// "incomplete": [...]} (incomplete is [] when every DPU is complete).
type IngestResult struct {
	Machines   []Machine    `json:"machines"`
	Incomplete []Incomplete `json:"incomplete"`
}

// loopbackFamily ties a family to its pool, its network-config column and
// its ExpectedDpu reservation.
type loopbackFamily struct {
	name   string
	pool   string
	column string
}

var loopbackFamilies = []loopbackFamily{
	{FamilyIPv4, PoolLoopbackV4, "loopback_ip"},
	{FamilyIPv6, PoolLoopbackV6, "loopback_ip_v6"},
}

func (f loopbackFamily) active(nc *models.NetworkConfig) *string {
	if f.name == FamilyIPv4 {
		return nc.LoopbackIP
	}
	return nc.LoopbackIPv6
}

func (f loopbackFamily) reserved(d *models.ExpectedDpu) *string {
	if d == nil {
		return nil
	}
	if f.name == FamilyIPv4 {
		return d.LoopbackIP
	}
	return d.LoopbackIPv6
}

func familyOfPool(pool string) (loopbackFamily, bool) {
	for _, f := range loopbackFamilies {
		if f.pool == pool {
			return f, true
		}
	}
	return loopbackFamily{}, false
}

// Report ingests a site-explorer report (DESIGN.md §4, §10): the
// ExpectedMachine is matched by BMC MAC, each DPU's reservation by its
// globally unique serial number, independent of list order (DPUs are
// processed in serial order, so automatic values do not depend on it). The
// host and its DPUs are recorded (`ready`) whatever happens to their
// loopbacks; a family that cannot be assigned now is listed in
// Incomplete. Repeating a report changes nothing.
//
// Errors: 422 invalid for a malformed BMC MAC (field bmc_mac_address) or
// serial (dpus[i].serial_number, the later occurrence of a duplicate); 409
// conflict when the host or one of the DPUs is decommissioned (delete it
// before ingesting it again).
func (a *Allocator) Report(ctx context.Context, spec ReportSpec) (*IngestResult, error) {
	mac, err := canonicalMAC(spec.BmcMacAddress)
	if err != nil {
		return nil, Errf(CodeInvalid, "bmc_mac_address", "bmc_mac_address %q is not a MAC address (six hex octets separated by ':' or '-')", spec.BmcMacAddress)
	}
	chassis := strings.TrimSpace(spec.ChassisSerialNumber)
	if len(chassis) > 128 {
		return nil, Errf(CodeInvalid, "chassis_serial_number", "chassis_serial_number is %d characters long; at most 128", len(chassis))
	}
	serials := make([]string, 0, len(spec.DPUs))
	index := map[string]int{} // serial → its position in the request, for error fields
	seen := map[string]bool{}
	for i, d := range spec.DPUs {
		s := strings.TrimSpace(d.SerialNumber)
		field := fmt.Sprintf("dpus[%d].serial_number", i)
		if !dpuSerialRE.MatchString(s) {
			return nil, Errf(CodeInvalid, field, "serial_number %q must match ^[A-Za-z0-9_.-]{1,64}$", d.SerialNumber)
		}
		if seen[s] {
			return nil, Errf(CodeInvalid, field, "serial_number %q appears twice in this report", s)
		}
		seen[s] = true
		index[s] = i
		serials = append(serials, s)
	}
	sort.Strings(serials)
	var res *IngestResult
	err = a.write(ctx, func(t *tx) error {
		res = &IngestResult{Incomplete: []Incomplete{}}
		pools, err := t.lockPools(PoolLoopbackV4, PoolLoopbackV6)
		if err != nil {
			return err
		}
		em, err := expectedMachineByMAC(t.DB, mac)
		if err != nil {
			return err
		}
		host, err := t.upsertHost(mac, chassis, em)
		if err != nil {
			return err
		}
		for _, s := range serials {
			dpu, err := t.upsertDPU(s, &host.MachineID)
			if err != nil {
				if e, ok := AsError(err); ok && e.Field == "serial_number" {
					return WithFieldPrefix(&Error{Code: e.Code, Message: e.Message}, fmt.Sprintf("dpus[%d].serial_number", index[s]))
				}
				return err
			}
			_, inc, err := t.ensureLoopbacks(pools, dpu)
			if err != nil {
				return err
			}
			res.Incomplete = append(res.Incomplete, inc...)
		}
		res.Machines, err = t.a.machinesOut(t.ctx, t.DB, []models.Machine{*host})
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Discover ingests one DPU found directly (DESIGN.md §5
// POST /machines:discover): its reservation is found by its globally
// unique serial number. With host_bmc_mac_address the host is recorded too
// (matched to its ExpectedMachine by BMC MAC) and the DPU attached to it;
// without it the DPU keeps the host it already has, or is a host-less
// entry of kind "dpu". The answer is that of a report.
func (a *Allocator) Discover(ctx context.Context, spec DiscoverSpec) (*IngestResult, error) {
	serial := strings.TrimSpace(spec.SerialNumber)
	if !dpuSerialRE.MatchString(serial) {
		return nil, Errf(CodeInvalid, "serial_number", "serial_number %q must match ^[A-Za-z0-9_.-]{1,64}$", spec.SerialNumber)
	}
	mac := ""
	if strings.TrimSpace(spec.HostBmcMacAddress) != "" {
		m, err := canonicalMAC(spec.HostBmcMacAddress)
		if err != nil {
			return nil, Errf(CodeInvalid, "host_bmc_mac_address", "host_bmc_mac_address %q is not a MAC address", spec.HostBmcMacAddress)
		}
		mac = m
	}
	var res *IngestResult
	err := a.write(ctx, func(t *tx) error {
		res = &IngestResult{Incomplete: []Incomplete{}}
		pools, err := t.lockPools(PoolLoopbackV4, PoolLoopbackV6)
		if err != nil {
			return err
		}
		var hostID *string
		if mac != "" {
			em, err := expectedMachineByMAC(t.DB, mac)
			if err != nil {
				return err
			}
			host, err := t.upsertHost(mac, "", em)
			if err != nil {
				return err
			}
			hostID = &host.MachineID
		}
		dpu, err := t.upsertDPU(serial, hostID)
		if err != nil {
			return err
		}
		_, inc, err := t.ensureLoopbacks(pools, dpu)
		if err != nil {
			return err
		}
		res.Incomplete = inc
		top := *dpu
		if dpu.HostMachineID != nil {
			// A fresh struct: Take on one whose primary key is set would also
			// filter on the DPU's machine_id and find nothing.
			var host models.Machine
			if err := t.Where("machine_id = ?", *dpu.HostMachineID).Take(&host).Error; err != nil {
				return err
			}
			top = host
		}
		res.Machines, err = t.a.machinesOut(t.ctx, t.DB, []models.Machine{top})
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// upsertHost records a host reported with this BMC MAC (machine_id derived
// from it), state ready; a known host keeps its id and gets its chassis
// serial and ExpectedMachine refreshed. A decommissioned host is 409.
func (t *tx) upsertHost(mac, chassis string, em *models.ExpectedMachine) (*models.Machine, error) {
	var emID *string
	if em != nil {
		emID = strp(em.ID)
		if chassis == "" {
			chassis = em.ChassisSerialNumber
		}
	}
	row := models.Machine{MachineID: HostMachineID(mac), Kind: KindHost, State: StateReady, BmcMacAddress: strp(mac),
		ChassisSerialNumber: chassis, ExpectedMachineID: emID, Version: 1, CreatedAt: t.now, UpdatedAt: t.now}
	res := t.Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
	if res.Error != nil {
		return nil, res.Error
	}
	if res.RowsAffected == 1 {
		return &row, t.audit("machine.create", "machine", row.MachineID, nil, machineAudit(&row))
	}
	var cur models.Machine
	if err := t.Where("machine_id = ?", row.MachineID).Take(&cur).Error; err != nil {
		return nil, err
	}
	if cur.State != StateReady {
		return nil, Errf(CodeConflict, "bmc_mac_address", "host %s (BMC %s) is %s; delete it before ingesting it again", cur.MachineID, mac, cur.State)
	}
	upd := map[string]any{}
	if chassis != "" && chassis != cur.ChassisSerialNumber {
		upd["chassis_serial_number"] = chassis
	}
	if deref(emID) != deref(cur.ExpectedMachineID) {
		upd["expected_machine_id"] = emID
	}
	if len(upd) == 0 {
		return &cur, nil
	}
	return t.updateMachine(&cur, upd)
}

// upsertDPU records the DPU of this serial (machine_id derived from it),
// state ready, under hostID when given: a DPU reported under another host
// than before moves there (the hardware moved) and keeps its loopbacks. A
// decommissioned DPU is 409.
func (t *tx) upsertDPU(serial string, hostID *string) (*models.Machine, error) {
	row := models.Machine{MachineID: DPUMachineID(serial), Kind: KindDPU, HostMachineID: hostID, State: StateReady,
		SerialNumber: strp(serial), Version: 1, CreatedAt: t.now, UpdatedAt: t.now}
	res := t.Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
	if res.Error != nil {
		return nil, res.Error
	}
	if res.RowsAffected == 1 {
		return &row, t.audit("machine.create", "machine", row.MachineID, nil, machineAudit(&row))
	}
	var cur models.Machine
	if err := t.Where("machine_id = ?", row.MachineID).Take(&cur).Error; err != nil {
		return nil, err
	}
	if cur.Kind != KindDPU {
		return nil, Errf(CodeConflict, "serial_number", "machine %s is not a DPU", cur.MachineID)
	}
	if cur.State != StateReady {
		return nil, Errf(CodeConflict, "serial_number", "DPU %s (%s) is %s; delete it before ingesting it again", serial, cur.MachineID, cur.State)
	}
	if hostID == nil || deref(cur.HostMachineID) == *hostID {
		return &cur, nil
	}
	return t.updateMachine(&cur, map[string]any{"host_machine_id": *hostID})
}

// updateMachine applies upd with the version compare-and-swap and audits it.
func (t *tx) updateMachine(cur *models.Machine, upd map[string]any) (*models.Machine, error) {
	before := machineAudit(cur)
	upd["version"] = cur.Version + 1
	upd["updated_at"] = t.now
	res := t.Model(&models.Machine{}).Where("machine_id = ? AND version = ?", cur.MachineID, cur.Version).Updates(upd)
	if res.Error != nil {
		return nil, res.Error
	}
	if res.RowsAffected != 1 {
		return nil, Errf(CodeStaleVersion, "", "machine %s changed meanwhile", cur.MachineID)
	}
	var out models.Machine
	if err := t.Where("machine_id = ?", cur.MachineID).Take(&out).Error; err != nil {
		return nil, err
	}
	return &out, t.audit("machine.update", "machine", out.MachineID, before, machineAudit(&out))
}

// machineAudit is the audit form of a machine row.
func machineAudit(m *models.Machine) map[string]any {
	return map[string]any{"machine_id": m.MachineID, "kind": m.Kind, "state": m.State, "bmc_mac_address": m.BmcMacAddress,
		"chassis_serial_number": m.ChassisSerialNumber, "serial_number": m.SerialNumber, "host_machine_id": m.HostMachineID,
		"expected_machine_id": m.ExpectedMachineID, "version": m.Version}
}

// networkConfig returns the DPU's ManagedHostNetworkConfig, creating an
// empty one (version 1) when it has none.
func (t *tx) networkConfig(machineID string) (*models.NetworkConfig, error) {
	row := models.NetworkConfig{MachineID: machineID, Version: 1, UpdatedAt: t.now}
	if err := t.Clauses(clause.OnConflict{DoNothing: true}).Create(&row).Error; err != nil {
		return nil, err
	}
	var nc models.NetworkConfig
	if err := t.Where("machine_id = ?", machineID).Take(&nc).Error; err != nil {
		return nil, err
	}
	return &nc, nil
}

// setLoopback writes one family of a network config with the version
// compare-and-swap (value nil clears it).
func (t *tx) setLoopback(nc *models.NetworkConfig, f loopbackFamily, value *string) error {
	before := map[string]any{"loopback_ip": nc.LoopbackIP, "loopback_ip_v6": nc.LoopbackIPv6, "version": nc.Version}
	res := t.Model(&models.NetworkConfig{}).Where("machine_id = ? AND version = ?", nc.MachineID, nc.Version).
		Updates(map[string]any{f.column: value, "version": nc.Version + 1, "updated_at": t.now})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected != 1 {
		return Errf(CodeStaleVersion, "", "network config of %s changed meanwhile", nc.MachineID)
	}
	nc.Version++
	if f.name == FamilyIPv4 {
		nc.LoopbackIP = value
	} else {
		nc.LoopbackIPv6 = value
	}
	after := map[string]any{"loopback_ip": nc.LoopbackIP, "loopback_ip_v6": nc.LoopbackIPv6, "version": nc.Version}
	return t.audit("network_config.update", "machine", nc.MachineID, before, after)
}

// EnsureLoopbacks is the one shared operation of DESIGN.md §4 for the DPU
// with this machine_id (or serial number): it creates or completes the
// DPU's ManagedHostNetworkConfig and returns the families it could not
// assign now. Reports, discovery, reconciliation and pool growth all run
// it (inside their own transaction, as ensureLoopbacks).
func (a *Allocator) EnsureLoopbacks(ctx context.Context, dpuID string) ([]Incomplete, error) {
	var out []Incomplete
	err := a.write(ctx, func(t *tx) error {
		pools, err := t.lockPools(PoolLoopbackV4, PoolLoopbackV6)
		if err != nil {
			return err
		}
		row, err := findMachine(t.DB, dpuID)
		if err != nil {
			return err
		}
		if row.Kind != KindDPU {
			return Errf(CodeInvalid, "machine_id", "machine %s is a host; loopbacks belong to its DPUs", row.MachineID)
		}
		if row.State != StateReady {
			return Errf(CodeConflict, "machine_id", "DPU %s is %s", row.MachineID, row.State)
		}
		_, out, err = t.ensureLoopbacks(pools, row)
		return err
	})
	if out == nil {
		out = []Incomplete{}
	}
	return out, err
}

// ensureLoopbacks applies the lifecycle rows of DESIGN.md §4 to one DPU,
// each family independently, with lo-ip / lo-ip-v6 already locked:
//   - a value the DPU already holds is kept (never readdressed), whatever
//     its reservation says now;
//   - a reservation for its serial → the reserved value through the
//     requested-value path; if that value is unavailable, or the DPU sits
//     under a host whose ExpectedMachine does not list it while another
//     ExpectedMachine declares it, the family stays unassigned (no
//     automatic fallback);
//   - no reservation → the value this machine held when it was force
//     deleted, if it is still quarantined for it, else an automatic value.
//
// It reports whether the network config changed.
func (t *tx) ensureLoopbacks(pools map[string]*models.Pool, dpu *models.Machine) (bool, []Incomplete, error) {
	serial := deref(dpu.SerialNumber)
	owner := Owner{Type: OwnerTypeMachine, ID: dpu.MachineID}
	nc, err := t.networkConfig(dpu.MachineID)
	if err != nil {
		return false, nil, err
	}
	decl, err := expectedDpuBySerial(t.DB, serial)
	if err != nil {
		return false, nil, err
	}
	misplaced, err := t.misplacedBy(dpu, decl)
	if err != nil {
		return false, nil, err
	}
	changed := false
	inc := []Incomplete{}
	for _, f := range loopbackFamilies {
		p := pools[f.pool]
		if p == nil {
			continue
		}
		value, problem, err := t.ensureFamily(p, f, owner, serial, f.active(nc), f.reserved(decl), misplaced)
		if err != nil {
			return false, nil, err
		}
		if problem != nil {
			problem.MachineID = dpu.MachineID
			problem.Family = f.name
			inc = append(inc, *problem)
		}
		if deref(value) != deref(f.active(nc)) {
			if err := t.setLoopback(nc, f, value); err != nil {
				return false, nil, err
			}
			changed = true
		}
	}
	return changed, inc, nil
}

// misplacedBy returns the ExpectedMachine that declares the DPU when the
// DPU sits under a host whose own ExpectedMachine lists it neither in
// expected_dpus nor in fallback_dpu_serial_numbers (DESIGN.md §4: the
// hardware is not where the site expects it), else nil. A host without an
// ExpectedMachine is never "misplaced": its DPUs are matched by serial.
func (t *tx) misplacedBy(dpu *models.Machine, decl *models.ExpectedDpu) (*models.ExpectedMachine, error) {
	if decl == nil || dpu.HostMachineID == nil {
		return nil, nil
	}
	var host models.Machine
	err := t.Where("machine_id = ?", *dpu.HostMachineID).Take(&host).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	hostEM, err := expectedMachineByMAC(t.DB, deref(host.BmcMacAddress))
	if err != nil || hostEM == nil || hostEM.ID == decl.ExpectedMachineID {
		return nil, err
	}
	lists, err := listsSerial(t.DB, hostEM, deref(dpu.SerialNumber))
	if err != nil || lists {
		return nil, err
	}
	var other models.ExpectedMachine
	if err := t.Where("id = ?", decl.ExpectedMachineID).Take(&other).Error; err != nil {
		return nil, err
	}
	return &other, nil
}

// ensureFamily decides one family's value; it returns the value the DPU
// holds afterwards (nil: unassigned) and, when unassigned, why.
func (t *tx) ensureFamily(p *models.Pool, f loopbackFamily, owner Owner, serial string, active, reserved *string,
	misplaced *models.ExpectedMachine) (*string, *Incomplete, error) {
	var held models.Allocation
	err := t.Where("pool_id = ? AND owner_type = ? AND owner_id = ? AND state = ?", p.ID, owner.Type, owner.ID, models.StateAllocated).Take(&held).Error
	if err == nil {
		return strp(held.Value), nil, nil
	}
	if !errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil, err
	}
	if active != nil {
		// The network config names a value the pool no longer gives this
		// DPU (released by hand): take it back when nobody else has it.
		row, err := t.retake(p, owner, serial, *active)
		if err != nil || row != nil {
			if row != nil {
				return strp(row.Value), nil, nil
			}
			return nil, nil, err
		}
	}
	if reserved != nil {
		if misplaced != nil {
			return nil, &Incomplete{Code: CodeConflict, Message: fmt.Sprintf(
				"DPU %s is declared by ExpectedMachine %s (BMC %s), not by the ExpectedMachine of the host it was reported under; its reserved %s %s is left unassigned until the ExpectedMachines are fixed",
				serial, misplaced.ID, misplaced.BmcMacAddress, f.pool, *reserved)}, nil
		}
		row, _, err := t.allocate(p, owner, *reserved)
		if e, ok := AsError(err); ok && (e.Code == CodeNotAvailable || e.Code == CodeConflict || e.Code == CodeInvalid) {
			return nil, &Incomplete{Code: CodeNotAvailable, Message: fmt.Sprintf(
				"reserved %s %s of DPU %s is not available (%s); left unassigned, no automatic fallback", f.pool, *reserved, serial, e.Message)}, nil
		}
		if err != nil {
			return nil, nil, err
		}
		return strp(row.Value), nil, nil
	}
	q, err := t.quarantinedFor(p, owner)
	if err != nil {
		return nil, nil, err
	}
	if q != nil {
		row, err := t.reclaimRow(p, q, owner)
		if err != nil {
			return nil, nil, err
		}
		return strp(row.Value), nil, nil
	}
	row, _, err := t.allocate(p, owner, "")
	if e, ok := AsError(err); ok && e.Code == CodePoolExhausted {
		return nil, &Incomplete{Code: CodePoolExhausted, Message: fmt.Sprintf("DPU %s: %s", serial, e.Message)}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return strp(row.Value), nil, nil
}

// retake gives owner back the value its network config names when that
// value lies in a range of p, is held by nobody and is not declared for
// another DPU; otherwise nil (the caller assigns anew).
func (t *tx) retake(p *models.Pool, owner Owner, serial, value string) (*models.Allocation, error) {
	sp := spaceOf(p)
	v, err := sp.parse(value)
	if err != nil {
		return nil, nil
	}
	var n int64
	if err := t.Model(&models.PoolRange{}).Where("pool_id = ? AND first_key <= ? AND last_key >= ?", p.ID, v.key(), v.key()).Count(&n).Error; err != nil || n == 0 {
		return nil, err
	}
	if taken, err := t.taken(p, v); err != nil || taken {
		return nil, err
	}
	if s, ok, err := t.declaredFor(p, v); err != nil || (ok && s != serial) {
		return nil, err
	}
	return t.insertAllocation(p, v, owner)
}

// ReconcileResult tells what a reconciliation did.
type ReconcileResult struct {
	// Checked is the number of ready DPUs that were missing a loopback.
	Checked int `json:"checked"`
	// Completed is the number of DPUs that got at least one value.
	Completed int `json:"completed"`
	// Incomplete lists what still could not be assigned.
	Incomplete []Incomplete `json:"incomplete"`
}

// ReconcileLoopbacks runs EnsureLoopbacks on every ready DPU missing a
// loopback of the given pools' families (lo-ip, lo-ip-v6; none given:
// both) — e.g. when lo-ip-v6 is defined after DPUs were ingested, a pool
// was exhausted and grew, or a reserved value became available again.
// It works in batches of 100 DPUs, one transaction each.
func (a *Allocator) ReconcileLoopbacks(ctx context.Context, pools ...string) (*ReconcileResult, error) {
	if len(pools) == 0 {
		pools = []string{PoolLoopbackV4, PoolLoopbackV6}
	}
	var conds []string
	for _, name := range pools {
		if f, ok := familyOfPool(name); ok {
			conds = append(conds, "nc."+f.column+" IS NULL")
		}
	}
	res := &ReconcileResult{Incomplete: []Incomplete{}}
	if len(conds) == 0 {
		return res, nil
	}
	var ids []string
	err := a.read(ctx, func(db *gorm.DB) error {
		return db.Raw(`SELECT m.machine_id FROM machines m LEFT JOIN network_configs nc ON nc.machine_id = m.machine_id
			WHERE m.kind = ? AND m.state = ? AND (nc.machine_id IS NULL OR `+strings.Join(conds, " OR ")+`)
			ORDER BY m.serial_number`, KindDPU, StateReady).Scan(&ids).Error
	})
	if err != nil {
		return nil, err
	}
	res.Checked = len(ids)
	for start := 0; start < len(ids); start += 100 {
		batch := ids[start:min(start+100, len(ids))]
		var completed int
		var inc []Incomplete
		err := a.write(ctx, func(t *tx) error {
			completed, inc = 0, nil
			locked, err := t.lockPools(PoolLoopbackV4, PoolLoopbackV6)
			if err != nil {
				return err
			}
			for _, id := range batch {
				var row models.Machine
				err := t.Where("machine_id = ? AND state = ?", id, StateReady).Take(&row).Error
				if errors.Is(err, gorm.ErrRecordNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				changed, problems, err := t.ensureLoopbacks(locked, &row)
				if err != nil {
					return err
				}
				if changed {
					completed++
				}
				inc = append(inc, problems...)
			}
			return nil
		})
		if err != nil {
			return res, err
		}
		res.Completed += completed
		res.Incomplete = append(res.Incomplete, inc...)
	}
	return res, nil
}

func init() {
	growthHook = func(a *Allocator, ctx context.Context, pool string) {
		if _, ok := familyOfPool(pool); !ok {
			return
		}
		// Leave the request that grew the pool time to answer: whatever
		// does not fit is completed by the next (periodic or startup)
		// reconciliation.
		if dl, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(context.WithoutCancel(ctx), dl.Add(-3*time.Second))
			defer cancel()
		}
		res, err := a.ReconcileLoopbacks(ctx, pool)
		if err != nil {
			a.log.Error("completing DPU loopbacks after pool growth failed", "pool", pool, "error", err)
			return
		}
		if res.Checked > 0 {
			a.log.Info("DPU loopbacks completed after pool growth", "pool", pool, "checked", res.Checked,
				"completed", res.Completed, "still_incomplete", len(res.Incomplete))
		}
	}
}

// Decommission takes a ready host (with its DPUs), or a DPU that has no
// host, out of service: state → decommissioned. Its values stay allocated
// until it is deleted. Not ready: 409 conflict; a DPU under a host: 409
// conflict (decommission the host); unknown: 404.
func (a *Allocator) Decommission(ctx context.Context, id string) (*Machine, error) {
	var out *Machine
	err := a.write(ctx, func(t *tx) error {
		if _, err := t.lockPools(PoolLoopbackV4, PoolLoopbackV6); err != nil {
			return err
		}
		row, err := findMachine(t.DB, id)
		if err != nil {
			return err
		}
		if row.Kind == KindDPU && row.HostMachineID != nil {
			return Errf(CodeConflict, "", "DPU %s belongs to host %s; decommission the host", row.MachineID, *row.HostMachineID)
		}
		if row.State != StateReady {
			return Errf(CodeConflict, "", "machine %s is %s, not ready", row.MachineID, row.State)
		}
		var dpus []models.Machine
		if err := t.Where("host_machine_id = ?", row.MachineID).Find(&dpus).Error; err != nil {
			return err
		}
		for _, m := range append([]models.Machine{*row}, dpus...) {
			if m.State != StateReady {
				continue
			}
			before := machineAudit(&m)
			res := t.Model(&models.Machine{}).Where("machine_id = ? AND version = ?", m.MachineID, m.Version).
				Updates(map[string]any{"state": StateDecommissioned, "version": m.Version + 1, "updated_at": t.now})
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected != 1 {
				return Errf(CodeStaleVersion, "", "machine %s changed meanwhile", m.MachineID)
			}
			m.State, m.Version = StateDecommissioned, m.Version+1
			if err := t.audit("machine.decommission", "machine", m.MachineID, before, machineAudit(&m)); err != nil {
				return err
			}
		}
		if err := t.Where("machine_id = ?", row.MachineID).Take(row).Error; err != nil {
			return err
		}
		ms, err := t.a.machinesOut(t.ctx, t.DB, []models.Machine{*row})
		if err != nil {
			return err
		}
		out = &ms[0]
		return nil
	})
	return out, err
}

// Delete-impact actions (DESIGN.md §10).
const (
	ActionRelease             = "release"
	ActionReturnToReservation = "return_to_reservation"
	ActionQuarantine          = "quarantine"
)

// ImpactValue is what a delete does to one value.
type ImpactValue struct {
	Pool   string `json:"pool"`
	Value  string `json:"value"`
	Action string `json:"action"`
	Reason string `json:"reason"`
	// owner and serial are kept for applying the delete.
	owner  Owner
	serial string
}

// DeleteImpact is the answer of GET /api/v1/machines/{id}/delete-impact.
type DeleteImpact struct {
	MachineID string        `json:"machine_id"`
	Force     bool          `json:"force"`
	Values    []ImpactValue `json:"values"`
	Warning   string        `json:"warning"`
}

// DeleteImpact previews DeleteMachine: per value the machine (a host with
// its DPUs, or a host-less DPU) holds, in any pool, whether it is released,
// returned to its reservation (declared by an ExpectedDpu for that DPU's
// serial) or quarantined (force delete of a machine that is not
// decommissioned), and a warning saying what the hardware may still carry.
func (a *Allocator) DeleteImpact(ctx context.Context, id string, force bool) (*DeleteImpact, error) {
	var out *DeleteImpact
	err := a.read(ctx, func(db *gorm.DB) error {
		row, err := findMachine(db, id)
		if err != nil {
			return err
		}
		out, err = a.impactOf(db, row, force)
		return err
	})
	return out, err
}

// impactOf computes the delete impact of row (inside the delete's
// transaction when it is applied).
func (a *Allocator) impactOf(db *gorm.DB, row *models.Machine, force bool) (*DeleteImpact, error) {
	members := []models.Machine{*row}
	if row.Kind == KindHost {
		var dpus []models.Machine
		if err := db.Where("host_machine_id = ?", row.MachineID).Order("serial_number").Find(&dpus).Error; err != nil {
			return nil, err
		}
		members = append(members, dpus...)
	}
	byID := map[string]*models.Machine{}
	ids := make([]string, 0, len(members))
	for i := range members {
		byID[members[i].MachineID] = &members[i]
		ids = append(ids, members[i].MachineID)
	}
	type held struct {
		models.Allocation
		PoolName string
	}
	var rows []held
	if err := db.Raw(`SELECT a.*, p.name AS pool_name FROM allocations a JOIN pools p ON p.id = a.pool_id
		WHERE a.state = ? AND a.owner_type = ? AND a.owner_id IN ? ORDER BY p.name, a.value_key`,
		models.StateAllocated, OwnerTypeMachine, ids).Scan(&rows).Error; err != nil {
		return nil, err
	}
	quarantine := force && row.State != StateDecommissioned
	imp := &DeleteImpact{MachineID: row.MachineID, Force: force, Values: []ImpactValue{}}
	var released, returned, quarantined, carried []string
	for _, h := range rows {
		m := byID[deref(h.OwnerID)]
		serial := deref(m.SerialNumber)
		who := "machine " + m.MachineID
		if serial != "" {
			who = fmt.Sprintf("DPU %s (%s)", serial, m.MachineID)
		}
		v := ImpactValue{Pool: h.PoolName, Value: h.Value, owner: Owner{Type: OwnerTypeMachine, ID: m.MachineID}, serial: serial}
		declared := ""
		if col := reservationColumn(h.PoolName); col != "" && serial != "" {
			var d models.ExpectedDpu
			err := db.Where(col+" = ?", h.ValueKey).Take(&d).Error
			if err == nil {
				declared = d.SerialNumber
			} else if !errors.Is(err, gorm.ErrRecordNotFound) {
				return nil, err
			}
		}
		switch {
		case declared != "" && declared == serial:
			v.Action = ActionReturnToReservation
			v.Reason = fmt.Sprintf("declared by an ExpectedDpu for %s: free again in its reserved range, reachable only by that DPU, which gets it back when ingested again", who)
			returned = append(returned, h.Value)
		case quarantine:
			v.Action = ActionQuarantine
			v.Reason = fmt.Sprintf("held by %s, which is not decommissioned: the hardware may still carry it, so it is quarantined (never handed out automatically) until an admin unquarantines it or the same hardware is ingested again", who)
			quarantined = append(quarantined, h.Value)
		default:
			v.Action = ActionRelease
			v.Reason = fmt.Sprintf("held by %s: free again", who)
			if row.State == StateDecommissioned {
				v.Reason = fmt.Sprintf("held by %s, decommissioned: free again", who)
			}
			released = append(released, h.Value)
		}
		if reservationColumn(h.PoolName) != "" {
			carried = append(carried, h.Value)
		}
		imp.Values = append(imp.Values, v)
	}
	var w []string
	if row.State != StateDecommissioned && !force {
		w = append(w, fmt.Sprintf("Machine %s is %s: deleting it requires decommissioning it first, or a force delete (admin).", row.MachineID, row.State))
	}
	if quarantine {
		w = append(w, fmt.Sprintf("Force delete of %s, which is not decommissioned.", row.MachineID))
	}
	if len(carried) > 0 && row.State != StateDecommissioned {
		w = append(w, "The hardware may still carry its loopbacks: "+strings.Join(carried, ", ")+".")
	}
	if len(quarantined) > 0 {
		w = append(w, fmt.Sprintf("%d value(s) go to quarantine: %s.", len(quarantined), strings.Join(quarantined, ", ")))
	}
	if len(returned) > 0 {
		w = append(w, fmt.Sprintf("%d value(s) return to their reservation: %s.", len(returned), strings.Join(returned, ", ")))
	}
	if len(released) > 0 {
		w = append(w, fmt.Sprintf("%d value(s) are released: %s.", len(released), strings.Join(released, ", ")))
	}
	if len(imp.Values) == 0 {
		w = append(w, "The machine holds no value.")
	}
	imp.Warning = strings.Join(w, " ")
	return imp, nil
}

// DeleteMachine deletes a machine permanently (a host with its DPUs, or a
// host-less DPU) and applies its delete impact in the same transaction:
// values declared for the DPU's serial return to their reservation, the
// others are released — or, on a force delete of a machine that is not
// decommissioned, quarantined with reason, time and former owner.
// Without force the machine must be decommissioned (409 conflict); force
// is for admins (checked by the caller's role). A DPU under a host is 409
// conflict (delete the host). It returns the impact applied.
func (a *Allocator) DeleteMachine(ctx context.Context, id string, force bool) (*DeleteImpact, error) {
	var out *DeleteImpact
	err := a.write(ctx, func(t *tx) error {
		row, err := findMachine(t.DB, id)
		if err != nil {
			return err
		}
		// Lock the loopback pools and every pool the machine holds a value
		// in, all at once in name order, before touching anything.
		var names []string
		if err := t.Raw(`SELECT DISTINCT p.name FROM allocations a JOIN pools p ON p.id = a.pool_id
			WHERE a.owner_type = ? AND (a.owner_id = ? OR a.owner_id IN (SELECT machine_id FROM machines WHERE host_machine_id = ?))`,
			OwnerTypeMachine, row.MachineID, row.MachineID).Scan(&names).Error; err != nil {
			return err
		}
		pools, err := t.lockPools(append(names, PoolLoopbackV4, PoolLoopbackV6)...)
		if err != nil {
			return err
		}
		if err := t.Where("machine_id = ?", row.MachineID).Take(row).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return Errf(CodeNotFound, "", "machine %q does not exist", id)
			}
			return err
		}
		if row.Kind == KindDPU && row.HostMachineID != nil {
			return Errf(CodeConflict, "", "DPU %s belongs to host %s; delete the host", row.MachineID, *row.HostMachineID)
		}
		if row.State != StateDecommissioned && !force {
			return Errf(CodeConflict, "", "machine %s is %s: decommission it first, or force delete it (admin)", row.MachineID, row.State)
		}
		imp, err := t.a.impactOf(t.DB, row, force)
		if err != nil {
			return err
		}
		for _, v := range imp.Values {
			p := pools[v.Pool]
			if p == nil {
				// Its pool name was read before locking; a concurrent
				// change is retried by the caller.
				return Errf(CodeConflict, "", "pool %q of %s changed meanwhile; retry", v.Pool, v.Value)
			}
			sp := spaceOf(p)
			key, err := sp.parse(v.Value)
			if err != nil {
				return err
			}
			switch v.Action {
			case ActionQuarantine:
				var al models.Allocation
				if err := t.Where("pool_id = ? AND value_key = ?", p.ID, key.key()).Take(&al).Error; err != nil {
					return err
				}
				reason := fmt.Sprintf("force delete of %s by %s: the hardware may still carry it", machineLabel(v.owner.ID, v.serial), ActorFrom(t.ctx).Name)
				if err := t.quarantine(p, &al, reason); err != nil {
					return err
				}
			default:
				if err := t.release(p, key, v.owner); err != nil {
					return err
				}
			}
		}
		var members []models.Machine
		if err := t.Where("machine_id = ? OR host_machine_id = ?", row.MachineID, row.MachineID).Find(&members).Error; err != nil {
			return err
		}
		ids := make([]string, 0, len(members))
		for _, m := range members {
			ids = append(ids, m.MachineID)
		}
		if err := t.Where("machine_id IN ?", ids).Delete(&models.NetworkConfig{}).Error; err != nil {
			return err
		}
		if err := t.Where("host_machine_id = ?", row.MachineID).Delete(&models.Machine{}).Error; err != nil {
			return err
		}
		if err := t.Where("machine_id = ?", row.MachineID).Delete(&models.Machine{}).Error; err != nil {
			return err
		}
		action := "machine.delete"
		if force && row.State != StateDecommissioned {
			action = "machine.force_delete"
		}
		for _, m := range members {
			var after any
			if m.MachineID == row.MachineID {
				after = imp
			}
			if err := t.audit(action, "machine", m.MachineID, machineAudit(&m), after); err != nil {
				return err
			}
		}
		out = imp
		return nil
	})
	return out, err
}

func machineLabel(id, serial string) string {
	if serial != "" {
		return fmt.Sprintf("DPU %s (%s)", serial, id)
	}
	return "machine " + id
}
