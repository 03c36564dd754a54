package allocator

import (
	"context"
	"sort"
	"strings"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

// Binding statuses per family (docs/api.md "Binding status per family").
const (
	// BindingReserved: the active value is the declared one.
	BindingReserved = "reserved"
	// BindingAutomatic: active value, nothing declared.
	BindingAutomatic = "automatic"
	// BindingPending: active value differs from the declared one (the
	// reservation was edited while the DPU was active); the DPU keeps its
	// value until it is deleted and ingested again (PendingRemedy).
	BindingPending = "pending"
	// BindingConflict: a value is declared but could not be assigned (held,
	// quarantined, or the DPU is declared by another ExpectedMachine than
	// its host's).
	BindingConflict = "conflict"
	// BindingMissing: the family's pool exists, nothing is declared and the
	// DPU has no value yet (e.g. the pool was exhausted).
	BindingMissing = "missing"
	// BindingNone: the family's pool does not exist and nothing is declared.
	BindingNone = "none"
)

// PendingRemedy is what applies a reservation whose binding is pending,
// in the one wording every page, flash and warning uses: a decommissioned
// host that reports again is refused until it is deleted, so decommission
// alone never applies it.
const PendingRemedy = "Decommission and delete the host, then ingest it again to apply the reservation"

// Binding is one ingested DPU's loopbacks against its reservations
// (GET /api/v1/dpu-bindings). Absent values are null; expected_machine_id
// is the ExpectedMachine that declares the DPU's serial, else the one of
// its host, and null once that ExpectedMachine is gone.
type Binding struct {
	MachineID         string  `json:"machine_id"`
	SerialNumber      string  `json:"serial_number"`
	HostMachineID     *string `json:"host_machine_id"`
	ExpectedMachineID *string `json:"expected_machine_id"`
	LoopbackIP        *string `json:"loopback_ip"`
	LoopbackIPv6      *string `json:"loopback_ip_v6"`
	ReservedIP        *string `json:"reserved_ip"`
	ReservedIPv6      *string `json:"reserved_ip_v6"`
	StatusV4          string  `json:"status_v4"`
	StatusV6          string  `json:"status_v6"`
	// HostName names the DPU's host (names.go); "" for a DPU without one.
	// Not part of the JSON shape.
	HostName string `json:"-"`
}

// BindingFilter selects bindings.
type BindingFilter struct {
	// Status keeps bindings whose v4 or v6 status is this one ("" all).
	Status string
	// Limit defaults to 100 and is capped at 1000.
	Limit int
	// Cursor is the next_cursor of the previous page (a machine_id).
	Cursor string
}

// BindingPage is one page of bindings ordered by machine_id.
type BindingPage struct {
	Items      []Binding `json:"items"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// ListBindings returns, per ingested DPU, its active and declared
// loopbacks and a status per family, computed from the stored state so it
// is always current. An unknown status filter is 422 invalid.
func (a *Allocator) ListBindings(ctx context.Context, f BindingFilter) (*BindingPage, error) {
	switch f.Status {
	case "", BindingReserved, BindingAutomatic, BindingPending, BindingConflict, BindingMissing, BindingNone:
	default:
		return nil, fault.Errf(fault.CodeInvalid, "status", "unknown status %q: want reserved, automatic, pending, conflict, missing or none", f.Status)
	}
	if err := checkMachineCursor(f.Cursor); err != nil {
		return nil, err
	}
	f.Limit = clampLimit(f.Limit)
	page := &BindingPage{Items: []Binding{}}
	cursor := f.Cursor
	err := a.read(ctx, func(db *gorm.DB) error {
		// A status filter reads the DPUs of that class through the
		// binding-class indexes (migration 23) instead of walking them
		// all; the status computed below stays the judge.
		var conds []string
		var args []any
		if f.Status != "" {
			hasPool, err := LoopbackPoolsExist(db)
			if err != nil {
				return err
			}
			for _, fam := range []struct{ col, pool string }{{"binding_v4", PoolLoopbackV4}, {"binding_v6", PoolLoopbackV6}} {
				for _, class := range []string{BindingReserved, BindingAutomatic, BindingPending, BindingConflict, fleetUnbound} {
					if BindingClassStatus(class, hasPool[fam.pool]) == f.Status {
						conds = append(conds, fam.col+" = ?")
						args = append(args, class)
					}
				}
			}
		}
		if f.Status != "" && len(conds) == 0 {
			return nil
		}
		for {
			batch := f.Limit + 1
			dpus, err := dpusOfClasses(db, conds, args, cursor, batch)
			if err != nil {
				return err
			}
			bs, err := BindingsOf(db, dpus)
			if err != nil {
				return err
			}
			for _, b := range bs {
				if f.Status != "" && b.StatusV4 != f.Status && b.StatusV6 != f.Status {
					continue
				}
				if len(page.Items) == f.Limit {
					page.NextCursor = page.Items[len(page.Items)-1].MachineID
					return nil
				}
				page.Items = append(page.Items, b)
			}
			if len(dpus) < batch {
				return nil
			}
			cursor = dpus[len(dpus)-1].MachineID
		}
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// dpusOfClasses reads the first n DPUs by machine_id after cursor ("" from
// the start) that meet any of conds (each "binding_vN = ?" with its class
// in args; none: every DPU). Each condition is read on its own, in order,
// through its binding-class index and at most n rows, and the reads are
// merged: the cost follows n, not how many DPUs are in the class (one
// read with OR collects every DPU of the classes and sorts them).
func dpusOfClasses(db *gorm.DB, conds []string, args []any, cursor string, n int) ([]models.Machine, error) {
	read := func(cond string, arg any) ([]models.Machine, error) {
		q := db.Where("kind = ?", KindDPU)
		if cond != "" {
			q = q.Where(cond, arg)
		}
		if cursor != "" {
			q = q.Where("machine_id > ?", cursor)
		}
		var rows []models.Machine
		return rows, q.Order("machine_id").Limit(n).Find(&rows).Error
	}
	if len(conds) == 0 {
		return read("", nil)
	}
	seen := map[string]bool{}
	var out []models.Machine
	for i, cond := range conds {
		rows, err := read(cond, args[i])
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			if !seen[r.MachineID] {
				seen[r.MachineID] = true
				out = append(out, r)
			}
		}
	}
	// machine_ids are of one length in lower-case base32
	// (machineIDRE), so byte order is the database's order, that of the
	// keyset cursor.
	sort.Slice(out, func(i, j int) bool { return out[i].MachineID < out[j].MachineID })
	return out[:min(n, len(out))], nil
}

// GetBinding returns the binding of one DPU (machine_id or serial number).
func (a *Allocator) GetBinding(ctx context.Context, id string) (*Binding, error) {
	var out *Binding
	err := a.read(ctx, func(db *gorm.DB) error {
		row, err := findMachine(db, id)
		if err != nil {
			return err
		}
		if row.Kind != KindDPU {
			return fault.Errf(fault.CodeNotFound, "", "machine %s is a host; bindings belong to DPUs", row.MachineID)
		}
		bs, err := BindingsOf(db, []models.Machine{*row})
		if err != nil {
			return err
		}
		out = &bs[0]
		return nil
	})
	return out, err
}

// BindingsOf computes the bindings of DPU rows read with db, with a fixed
// number of queries per batch.
func BindingsOf(db *gorm.DB, dpus []models.Machine) ([]Binding, error) {
	out := make([]Binding, 0, len(dpus))
	if len(dpus) == 0 {
		return out, nil
	}
	hasPool, err := LoopbackPoolsExist(db)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(dpus))
	serials := make([]string, 0, len(dpus))
	hostIDs := []string{}
	for _, d := range dpus {
		ids = append(ids, d.MachineID)
		serials = append(serials, deref(d.SerialNumber))
		if d.HostMachineID != nil {
			hostIDs = append(hostIDs, *d.HostMachineID)
		}
	}
	var ncRows []models.NetworkConfig
	if err := db.Where("machine_id IN ?", ids).Find(&ncRows).Error; err != nil {
		return nil, err
	}
	ncs := map[string]*models.NetworkConfig{}
	for i := range ncRows {
		ncs[ncRows[i].MachineID] = &ncRows[i]
	}
	var declRows []models.ExpectedDPU
	if err := db.Where("serial_number IN ?", serials).Find(&declRows).Error; err != nil {
		return nil, err
	}
	decls := map[string]*models.ExpectedDPU{}
	for i := range declRows {
		decls[declRows[i].SerialNumber] = &declRows[i]
	}
	hosts := map[string]*models.Machine{}
	if len(hostIDs) > 0 {
		var rows []models.Machine
		if err := db.Where("machine_id IN ?", hostIDs).Find(&rows).Error; err != nil {
			return nil, err
		}
		for i := range rows {
			hosts[rows[i].MachineID] = &rows[i]
		}
	}
	hostEMs := map[string]*models.ExpectedMachine{}
	var macs []string
	for _, h := range hosts {
		if h.BmcMacAddress != nil {
			macs = append(macs, *h.BmcMacAddress)
		}
	}
	if len(macs) > 0 {
		var rows []models.ExpectedMachine
		if err := db.Where("bmc_mac_address IN ?", macs).Find(&rows).Error; err != nil {
			return nil, err
		}
		for i := range rows {
			hostEMs[strings.ToLower(rows[i].BmcMacAddress)] = &rows[i]
		}
	}
	for _, d := range dpus {
		serial := deref(d.SerialNumber)
		nc := ncs[d.MachineID]
		if nc == nil {
			nc = &models.NetworkConfig{}
		}
		decl := decls[serial]
		var hostEM *models.ExpectedMachine
		if d.HostMachineID != nil {
			if h := hosts[*d.HostMachineID]; h != nil {
				hostEM = hostEMs[deref(h.BmcMacAddress)]
			}
		}
		b := Binding{MachineID: d.MachineID, SerialNumber: serial, HostMachineID: d.HostMachineID,
			LoopbackIP: nc.LoopbackIP, LoopbackIPv6: nc.LoopbackIPv6}
		if d.HostMachineID != nil {
			if h := hosts[*d.HostMachineID]; h != nil {
				name := ""
				if hostEM != nil {
					name = hostEM.MetadataName
				}
				b.HostName = HostName(name, h.ChassisSerialNumber, deref(h.BmcMacAddress), h.MachineID)
			}
		}
		switch {
		case decl != nil:
			b.ExpectedMachineID = strp(decl.ExpectedMachineID)
			b.ReservedIP, b.ReservedIPv6 = decl.LoopbackIP, decl.LoopbackIPv6
		case hostEM != nil:
			b.ExpectedMachineID = strp(hostEM.ID)
		}
		b.StatusV4 = BindingStatus(b.LoopbackIP, b.ReservedIP, hasPool[PoolLoopbackV4])
		b.StatusV6 = BindingStatus(b.LoopbackIPv6, b.ReservedIPv6, hasPool[PoolLoopbackV6])
		out = append(out, b)
	}
	return out, nil
}

// LoopbackPoolsExist tells, read with db, which of lo-ip and lo-ip-v6
// exist.
func LoopbackPoolsExist(db *gorm.DB) (map[string]bool, error) {
	var poolNames []string
	if err := db.Model(&models.Pool{}).Where("name IN ?", []string{PoolLoopbackV4, PoolLoopbackV6}).Pluck("name", &poolNames).Error; err != nil {
		return nil, err
	}
	hasPool := map[string]bool{}
	for _, n := range poolNames {
		hasPool[n] = true
	}
	return hasPool, nil
}

// BindingStatus is the status of one family (docs/api.md). A declared
// value that the DPU does not hold is `conflict`: ingestion never falls
// back to an automatic value for a reserved family, so the only ways to
// get there are an unavailable reserved value or a DPU declared by another
// ExpectedMachine than its host's.
func BindingStatus(active, reserved *string, poolExists bool) string {
	switch {
	case active != nil && reserved == nil:
		return BindingAutomatic
	case active != nil && *active == *reserved:
		return BindingReserved
	case active != nil:
		return BindingPending
	case reserved != nil:
		return BindingConflict
	case poolExists:
		return BindingMissing
	}
	return BindingNone
}

// fleetUnbound is the binding class stored (on a DPU, in fleet_counts;
// migration 23) for a family without value and reservation.
const fleetUnbound = "unbound"

// BindingClassStatus is the binding status of a binding class stored on a
// DPU and counted in fleet_counts (migration 23): a family without value
// or reservation is missing when its pool exists, else none.
func BindingClassStatus(class string, poolExists bool) string {
	if class != fleetUnbound {
		return class
	}
	if poolExists {
		return BindingMissing
	}
	return BindingNone
}
