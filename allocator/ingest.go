package allocator

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/ident"
	"github.com/ipledger/ipledger/models"
)

// Ingestion of docs/reservations.md: one site-explorer report (Report) or
// one directly discovered DPU (Discover) and the machine rows they write.
// Report batches are in report_batch.go and report_plain*.go, loopbacks in
// loopbacks.go, reconciliation in reconcile.go, decommission and delete in
// machine_removal.go. Every write runs in one transaction that first locks
// lo-ip and lo-ip-v6 (in name order) and only then touches machine rows, so
// that concurrent reports, deletes and ExpectedMachine edits never deadlock
// and a DPU is given one value per family however many reports race for it.

// ReportSpec is the body of POST /api/v1/site-explorer/reports: a host by
// its BMC MAC address with the serial numbers of its DPUs (any order).
type ReportSpec struct {
	BmcMacAddress       string      `json:"bmc_mac_address"`
	ChassisSerialNumber string      `json:"chassis_serial_number"`
	DPUs                []ReportDPU `json:"dpus"`
}

// ReportDPU is one DPU of a report, with the MAC address of its own BMC
// when site-explorer knows it (optional: a report without it keeps the
// one stored, docs/api.md).
type ReportDPU struct {
	SerialNumber  string `json:"serial_number"`
	BmcMacAddress string `json:"bmc_mac_address,omitempty"`
}

// DiscoverSpec is the body of POST /api/v1/machines:discover: one DPU by
// serial number, optionally with its host's BMC MAC address.
type DiscoverSpec struct {
	SerialNumber      string `json:"serial_number"`
	HostBmcMacAddress string `json:"host_bmc_mac_address,omitempty"`
}

// Incomplete is a DPU family whose loopback could not be assigned now
// (docs/api.md): code pool_exhausted, not_available (its reserved value
// is held, quarantined or outside the reserved range) or conflict (the DPU
// is declared by another ExpectedMachine than its host's). Reconciliation
// and pool growth complete it later; only families whose pool exists are
// listed.
type Incomplete struct {
	MachineID string     `json:"machine_id"`
	Family    string     `json:"family"`
	Code      fault.Code `json:"code"`
	Message   string     `json:"message"`
}

// IngestResult answers a report or a discovery: 200 {"machines": [...],
// "incomplete": [...]} (incomplete is [] when every DPU is complete).
type IngestResult struct {
	Machines   []Machine    `json:"machines"`
	Incomplete []Incomplete `json:"incomplete"`
}

// Report ingests a site-explorer report (docs/reservations.md, docs/api.md): the
// ExpectedMachine is matched by BMC MAC, each DPU's reservation by its
// globally unique serial number, independent of list order (DPUs are
// processed in serial order, so automatic values do not depend on it). The
// host and its DPUs are recorded (`ready`) whatever happens to their
// loopbacks; a family that cannot be assigned now is listed in
// Incomplete. Repeating a report changes nothing.
//
// Errors: 422 invalid for a malformed BMC MAC (field bmc_mac_address or
// dpus[i].bmc_mac_address), serial (dpus[i].serial_number, the later
// occurrence of a duplicate) or a BMC MAC named twice in the report; 409
// conflict when the host or one of the DPUs is decommissioned (delete it
// before ingesting it again) or when a BMC MAC is already another
// machine's.
func (a *Allocator) Report(ctx context.Context, spec ReportSpec) (*IngestResult, error) {
	r, err := newReport(spec)
	if err != nil {
		return nil, err
	}
	return a.queueReport(ctx, r)
}

// newReport validates a report (Report's 422 errors).
func newReport(spec ReportSpec) (*report, error) {
	mac, err := ident.ParseMAC(spec.BmcMacAddress)
	if err != nil {
		return nil, fault.Errf(fault.CodeInvalid, "bmc_mac_address", "bmc_mac_address %q is not a MAC address: want %s", spec.BmcMacAddress, ident.MACRule)
	}
	chassis := strings.TrimSpace(spec.ChassisSerialNumber)
	if len(chassis) > 128 {
		return nil, fault.Errf(fault.CodeInvalid, "chassis_serial_number", "chassis_serial_number is %d characters long; at most 128", len(chassis))
	}
	if c, bad := ident.Invisible(chassis, false); bad {
		return nil, invisibleError("chassis_serial_number", chassis, c)
	}
	serials := make([]string, 0, len(spec.DPUs))
	index := map[string]int{} // serial → its position in the request, for error fields
	seen := map[string]bool{}
	dpuMACs, err := reportDPUMACs(mac, spec.DPUs)
	if err != nil {
		return nil, err
	}
	for i, d := range spec.DPUs {
		s := strings.TrimSpace(d.SerialNumber)
		field := fmt.Sprintf("dpus[%d].serial_number", i)
		if !ident.ValidSerial(s) {
			return nil, fault.Errf(fault.CodeInvalid, field, "serial_number %q must be %s", d.SerialNumber, ident.SerialRule)
		}
		if seen[s] {
			return nil, fault.Errf(fault.CodeInvalid, field, "serial_number %q appears twice in this report", s)
		}
		seen[s] = true
		index[s] = i
		serials = append(serials, s)
	}
	sort.Strings(serials)
	r := &report{mac: mac, chassis: chassis, serials: serials, index: index}
	for i, m := range dpuMACs {
		if m != "" {
			if r.dpuMACs == nil {
				r.dpuMACs = map[string]string{}
			}
			r.dpuMACs[strings.TrimSpace(spec.DPUs[i].SerialNumber)] = m
		}
	}
	return r, nil
}

// report is a validated site-explorer report: the canonical BMC MAC, the
// chassis serial, the DPU serials in serial order and each one's position
// in the request (for error fields), and the canonical BMC MAC of each DPU
// that has one, by serial.
type report struct {
	mac, chassis string
	serials      []string
	index        map[string]int
	dpuMACs      map[string]string
}

// ingestReport is Report inside a transaction that holds lo-ip and
// lo-ip-v6 (pools, locked first).
func (t *tx) ingestReport(pools map[string]*models.Pool, r *report) (*IngestResult, error) {
	res := &IngestResult{Incomplete: []Incomplete{}}
	em, err := expectedMachineByMAC(t.DB, r.mac)
	if err != nil {
		return nil, err
	}
	host, err := t.upsertHost(r.mac, r.chassis, em)
	if err != nil {
		return nil, err
	}
	for _, s := range r.serials {
		dpu, err := t.upsertDPU(s, &host.MachineID, r.dpuMACs[s])
		if err != nil {
			if e, ok := fault.AsError(err); ok && (e.Field == "serial_number" || e.Field == "bmc_mac_address") {
				return nil, fault.WithFieldPrefix(&fault.Error{Code: e.Code, Message: e.Message}, fmt.Sprintf("dpus[%d].%s", r.index[s], e.Field))
			}
			return nil, err
		}
		_, inc, err := t.ensureLoopbacks(pools, dpu)
		if err != nil {
			return nil, err
		}
		res.Incomplete = append(res.Incomplete, inc...)
	}
	res.Machines, err = t.a.MachinesOf(t.ctx, t.DB, []models.Machine{*host})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// reportAlone runs one report in a transaction of its own.
func (a *Allocator) reportAlone(ctx context.Context, r *report) (*IngestResult, error) {
	var res *IngestResult
	err := a.write(ctx, func(t *tx) error {
		pools, err := t.lockPools(PoolLoopbackV4, PoolLoopbackV6)
		if err != nil {
			return err
		}
		res, err = t.ingestReport(pools, r)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Discover ingests one DPU found directly (docs/api.md
// POST /machines:discover): its reservation is found by its globally
// unique serial number. With host_bmc_mac_address the host is recorded too
// (matched to its ExpectedMachine by BMC MAC) and the DPU attached to it;
// without it the DPU keeps the host it already has, or is a host-less
// entry of kind "dpu". The answer is that of a report.
func (a *Allocator) Discover(ctx context.Context, spec DiscoverSpec) (*IngestResult, error) {
	serial := strings.TrimSpace(spec.SerialNumber)
	if !ident.ValidSerial(serial) {
		return nil, fault.Errf(fault.CodeInvalid, "serial_number", "serial_number %q must be %s", spec.SerialNumber, ident.SerialRule)
	}
	mac := ""
	if strings.TrimSpace(spec.HostBmcMacAddress) != "" {
		m, err := ident.ParseMAC(spec.HostBmcMacAddress)
		if err != nil {
			return nil, fault.Errf(fault.CodeInvalid, "host_bmc_mac_address", "host_bmc_mac_address %q is not a MAC address: want %s", spec.HostBmcMacAddress, ident.MACRule)
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
		dpu, err := t.upsertDPU(serial, hostID, "")
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
		res.Machines, err = t.a.MachinesOf(t.ctx, t.DB, []models.Machine{top})
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
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, t.bmcMACTaken(mac, row.MachineID) // the insert met another machine's BMC MAC
		}
		return nil, err
	}
	if cur.State != StateReady {
		return nil, fault.Errf(fault.CodeConflict, "bmc_mac_address", "%s, BMC %s, is %s; delete it before ingesting it again", machineRowLabel(t.DB, &cur), mac, cur.State)
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
// than before moves there (the hardware moved) and keeps its loopbacks.
// A non-empty mac (canonical) is the DPU's BMC MAC, set or changed; an
// empty one keeps what is stored. A decommissioned DPU is 409, and so is
// a BMC MAC that is another machine's (field bmc_mac_address).
func (t *tx) upsertDPU(serial string, hostID *string, mac string) (*models.Machine, error) {
	row := models.Machine{MachineID: DPUMachineID(serial), Kind: KindDPU, HostMachineID: hostID, State: StateReady,
		SerialNumber: strp(serial), Version: 1, CreatedAt: t.now, UpdatedAt: t.now}
	if mac != "" {
		row.BmcMacAddress = strp(mac)
	}
	res := t.Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
	if res.Error != nil {
		return nil, res.Error
	}
	if res.RowsAffected == 1 {
		return &row, t.audit("machine.create", "machine", row.MachineID, nil, machineAudit(&row))
	}
	var cur models.Machine
	if err := t.Where("machine_id = ?", row.MachineID).Take(&cur).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) && mac != "" {
			return nil, t.bmcMACTaken(mac, row.MachineID) // the insert met another machine's BMC MAC
		}
		return nil, err
	}
	if cur.Kind != KindDPU {
		return nil, fault.Errf(fault.CodeConflict, "serial_number", "machine %s is not a DPU", cur.MachineID)
	}
	if cur.State != StateReady {
		return nil, fault.Errf(fault.CodeConflict, "serial_number", "DPU %s (%s) is %s; delete it before ingesting it again", serial, cur.MachineID, cur.State)
	}
	upd := map[string]any{}
	if hostID != nil && deref(cur.HostMachineID) != *hostID {
		upd["host_machine_id"] = *hostID
	}
	if mac != "" && mac != deref(cur.BmcMacAddress) {
		if err := t.bmcMACFree(mac, cur.MachineID); err != nil {
			return nil, err
		}
		upd["bmc_mac_address"] = mac
	}
	if len(upd) == 0 {
		return &cur, nil
	}
	return t.updateMachine(&cur, upd)
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
		return nil, fault.Errf(fault.CodeStaleVersion, "", "machine %s changed meanwhile", cur.MachineID)
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
	res := t.Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
	if res.Error != nil {
		return nil, res.Error
	}
	if res.RowsAffected == 1 {
		return &row, nil // created now: the row is what was inserted
	}
	var nc models.NetworkConfig
	if err := t.Where("machine_id = ?", machineID).Take(&nc).Error; err != nil {
		return nil, err
	}
	return &nc, nil
}
