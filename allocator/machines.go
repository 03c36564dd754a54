package allocator

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/ident"
	"github.com/ipledger/ipledger/models"
)

// Machine kinds and host states (docs/api.md "Hosts").
const (
	KindHost = "host"
	KindDPU  = "dpu"

	StateReady          = "ready"
	StateDecommissioned = "decommissioned"
)

// Loopback families as reports and bindings name them.
const (
	FamilyIPv4 = "ipv4"
	FamilyIPv6 = "ipv6"
)

// NetworkConfig is a DPU's ManagedHostNetworkConfig: its loopbacks (null
// when not assigned) and the record version, incremented on every change
// and compared on every write (compare-and-swap).
type NetworkConfig struct {
	LoopbackIP   *string `json:"loopback_ip"`
	LoopbackIPv6 *string `json:"loopback_ip_v6"`
	Version      int64   `json:"version"`
}

// Machine is an ingested managed host with its DPUs, or a DPU. JSON
// (docs/api.md "Machines"):
//
//	host: {"machine_id", "kind": "host", "state", "bmc_mac_address",
//	       "chassis_serial_number", "expected_machine_id", "dpus": [dpu…]}
//	dpu inside a host: {"machine_id", "kind": "dpu", "serial_number",
//	       "bmc_mac_address" (only when known), "network_config"}
//	dpu at the top level (discovered without a known host, or read by its
//	own id): the same plus "state" and "host_machine_id" (null when none).
type Machine struct {
	MachineID           string
	Kind                string
	State               string
	BmcMacAddress       *string
	ChassisSerialNumber string
	ExpectedMachineID   *string
	DPUs                []Machine
	SerialNumber        string
	HostMachineID       *string
	NetworkConfig       *NetworkConfig
	// Name is what pages and messages call the machine (names.go): a
	// host's ExpectedMachine name, chassis serial or BMC MAC; a DPU's
	// serial. EMName is the host's ExpectedMachine metadata.name ("" when
	// it has none). Neither is part of the JSON shape.
	Name   string
	EMName string
	// nested marks a DPU listed inside its host.
	nested bool
}

// MarshalJSON renders the per-kind shape of docs/api.md.
func (m Machine) MarshalJSON() ([]byte, error) {
	if m.Kind == KindHost {
		dpus := m.DPUs
		if dpus == nil {
			dpus = []Machine{}
		}
		return json.Marshal(struct {
			MachineID           string    `json:"machine_id"`
			Kind                string    `json:"kind"`
			State               string    `json:"state"`
			BmcMacAddress       *string   `json:"bmc_mac_address"`
			ChassisSerialNumber string    `json:"chassis_serial_number"`
			ExpectedMachineID   *string   `json:"expected_machine_id"`
			DPUs                []Machine `json:"dpus"`
		}{m.MachineID, m.Kind, m.State, m.BmcMacAddress, m.ChassisSerialNumber, m.ExpectedMachineID, dpus})
	}
	nc := m.NetworkConfig
	if nc == nil {
		nc = &NetworkConfig{}
	}
	if m.nested {
		return json.Marshal(struct {
			MachineID     string         `json:"machine_id"`
			Kind          string         `json:"kind"`
			SerialNumber  string         `json:"serial_number"`
			BmcMacAddress *string        `json:"bmc_mac_address,omitempty"`
			NetworkConfig *NetworkConfig `json:"network_config"`
		}{m.MachineID, m.Kind, m.SerialNumber, m.BmcMacAddress, nc})
	}
	return json.Marshal(struct {
		MachineID     string         `json:"machine_id"`
		Kind          string         `json:"kind"`
		State         string         `json:"state"`
		HostMachineID *string        `json:"host_machine_id"`
		SerialNumber  string         `json:"serial_number"`
		BmcMacAddress *string        `json:"bmc_mac_address,omitempty"`
		NetworkConfig *NetworkConfig `json:"network_config"`
	}{m.MachineID, m.Kind, m.State, m.HostMachineID, m.SerialNumber, m.BmcMacAddress, nc})
}

// UnmarshalJSON reads either shape back (CLI, console, tests).
func (m *Machine) UnmarshalJSON(b []byte) error {
	var raw struct {
		MachineID           string         `json:"machine_id"`
		Kind                string         `json:"kind"`
		State               string         `json:"state"`
		BmcMacAddress       *string        `json:"bmc_mac_address"`
		ChassisSerialNumber string         `json:"chassis_serial_number"`
		ExpectedMachineID   *string        `json:"expected_machine_id"`
		DPUs                []Machine      `json:"dpus"`
		SerialNumber        string         `json:"serial_number"`
		HostMachineID       *string        `json:"host_machine_id"`
		NetworkConfig       *NetworkConfig `json:"network_config"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*m = Machine{MachineID: raw.MachineID, Kind: raw.Kind, State: raw.State, BmcMacAddress: raw.BmcMacAddress,
		ChassisSerialNumber: raw.ChassisSerialNumber, ExpectedMachineID: raw.ExpectedMachineID, DPUs: raw.DPUs,
		SerialNumber: raw.SerialNumber, HostMachineID: raw.HostMachineID, NetworkConfig: raw.NetworkConfig}
	for i := range m.DPUs {
		m.DPUs[i].nested = true
	}
	return nil
}

// MachineFilter selects top-level machines (hosts and host-less DPUs).
type MachineFilter struct {
	// State is "", "ready" or "decommissioned".
	State string
	// Limit defaults to 100 and is capped at 1000.
	Limit int
	// Cursor is the next_cursor of the previous page (a machine_id).
	Cursor string
}

// MachinePage is one page of machines ordered by machine_id.
type MachinePage struct {
	Items      []Machine `json:"items"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// ListMachines returns managed hosts with their DPUs and network configs,
// and DPUs discovered without a known host as top-level entries of kind
// "dpu", ordered by machine_id and keyset-paginated. An unknown state is
// 422 invalid.
func (a *Allocator) ListMachines(ctx context.Context, f MachineFilter) (*MachinePage, error) {
	switch f.State {
	case "", StateReady, StateDecommissioned:
	default:
		return nil, fault.Errf(fault.CodeInvalid, "state", "unknown state %q: want ready or decommissioned", f.State)
	}
	if err := checkMachineCursor(f.Cursor); err != nil {
		return nil, err
	}
	f.Limit = clampLimit(f.Limit)
	var top []models.Machine
	err := a.read(ctx, func(db *gorm.DB) error {
		q := db.Where("host_machine_id IS NULL")
		if f.State != "" {
			q = q.Where("state = ?", f.State)
		}
		if f.Cursor != "" {
			q = q.Where("machine_id > ?", f.Cursor)
		}
		return q.Order("machine_id").Limit(f.Limit + 1).Find(&top).Error
	})
	if err != nil {
		return nil, err
	}
	page := &MachinePage{Items: []Machine{}}
	if len(top) > f.Limit {
		top = top[:f.Limit]
		page.NextCursor = top[len(top)-1].MachineID
	}
	items, err := a.MachinesOf(ctx, a.db.WithContext(ctx), top)
	if err != nil {
		return nil, err
	}
	page.Items = items
	return page, nil
}

// GetMachine returns one machine: a host with its DPUs, or a DPU (with its
// state and host_machine_id). id is a machine_id; a host's BMC MAC address
// or a DPU's serial number are accepted too. Unknown: 404 not_found.
func (a *Allocator) GetMachine(ctx context.Context, id string) (*Machine, error) {
	var out *Machine
	err := a.read(ctx, func(db *gorm.DB) error {
		row, err := findMachine(db, id)
		if err != nil {
			return err
		}
		ms, err := a.MachinesOf(ctx, db, []models.Machine{*row})
		if err != nil {
			return err
		}
		out = &ms[0]
		return nil
	})
	return out, err
}

// findMachine resolves a machine_id, a host BMC MAC address or a DPU serial
// number to its row, or answers 404.
func findMachine(db *gorm.DB, id string) (*models.Machine, error) {
	id = strings.TrimSpace(id)
	cands := []string{id}
	if mac, err := ident.ParseMAC(id); err == nil {
		cands = append(cands, HostMachineID(mac))
	}
	if ident.ValidSerial(id) {
		cands = append(cands, DPUMachineID(id))
	}
	for _, c := range cands {
		var m models.Machine
		err := db.Where("machine_id = ?", c).Take(&m).Error
		if err == nil {
			return &m, nil
		}
		if !errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, err
		}
	}
	return nil, fault.Errf(fault.CodeNotFound, "", "machine %q does not exist (give a machine_id, a host BMC MAC address or a DPU serial number)", id)
}

// MachinesOf renders machine rows read with db as the API shows them:
// hosts with their DPUs (ordered by serial number), DPUs with their
// network config.
func (a *Allocator) MachinesOf(ctx context.Context, db *gorm.DB, top []models.Machine) ([]Machine, error) {
	out := make([]Machine, 0, len(top))
	var hostIDs, dpuIDs []string
	for _, m := range top {
		if m.Kind == KindHost {
			hostIDs = append(hostIDs, m.MachineID)
		} else {
			dpuIDs = append(dpuIDs, m.MachineID)
		}
	}
	var children []models.Machine
	if len(hostIDs) > 0 {
		if err := db.Where("host_machine_id IN ?", hostIDs).Order("serial_number").Find(&children).Error; err != nil {
			return nil, err
		}
		for _, c := range children {
			dpuIDs = append(dpuIDs, c.MachineID)
		}
	}
	ncs := map[string]*NetworkConfig{}
	if len(dpuIDs) > 0 {
		var rows []models.NetworkConfig
		if err := db.Where("machine_id IN ?", dpuIDs).Find(&rows).Error; err != nil {
			return nil, err
		}
		for _, r := range rows {
			ncs[r.MachineID] = &NetworkConfig{LoopbackIP: r.LoopbackIP, LoopbackIPv6: r.LoopbackIPv6, Version: r.Version}
		}
	}
	emByMAC := map[string]string{}
	emName := map[string]string{}
	var macs []string
	for _, m := range top {
		if m.Kind == KindHost && m.BmcMacAddress != nil {
			macs = append(macs, *m.BmcMacAddress)
		}
	}
	if len(macs) > 0 {
		var ems []models.ExpectedMachine
		if err := db.Select("id", "bmc_mac_address", "metadata_name").Where("bmc_mac_address IN ?", macs).Find(&ems).Error; err != nil {
			return nil, err
		}
		for _, em := range ems {
			emByMAC[strings.ToLower(em.BmcMacAddress)] = em.ID
			emName[strings.ToLower(em.BmcMacAddress)] = em.MetadataName
		}
	}
	byHost := map[string][]Machine{}
	for _, c := range children {
		byHost[deref(c.HostMachineID)] = append(byHost[deref(c.HostMachineID)], dpuOut(&c, ncs, true))
	}
	for i := range top {
		m := &top[i]
		if m.Kind == KindHost {
			dpus := byHost[m.MachineID]
			if dpus == nil {
				dpus = []Machine{}
			}
			// The ExpectedMachine is matched live by BMC MAC: null once it is gone.
			var em *string
			if id, ok := emByMAC[deref(m.BmcMacAddress)]; ok {
				em = strp(id)
			}
			n := emName[deref(m.BmcMacAddress)]
			out = append(out, Machine{MachineID: m.MachineID, Kind: KindHost, State: m.State, BmcMacAddress: m.BmcMacAddress,
				ChassisSerialNumber: m.ChassisSerialNumber, ExpectedMachineID: em, DPUs: dpus,
				Name: HostName(n, m.ChassisSerialNumber, deref(m.BmcMacAddress), m.MachineID), EMName: n})
			continue
		}
		out = append(out, dpuOut(m, ncs, false))
	}
	return out, nil
}

func dpuOut(m *models.Machine, ncs map[string]*NetworkConfig, nested bool) Machine {
	nc := ncs[m.MachineID]
	if nc == nil {
		nc = &NetworkConfig{Version: 0}
	}
	return Machine{MachineID: m.MachineID, Kind: KindDPU, State: m.State, SerialNumber: deref(m.SerialNumber),
		BmcMacAddress: m.BmcMacAddress, HostMachineID: m.HostMachineID, NetworkConfig: nc, nested: nested, Name: deref(m.SerialNumber)}
}

func clampLimit(n int) int {
	if n <= 0 {
		return 100
	}
	if n > 1000 {
		return 1000
	}
	return n
}

// expectedMachineByMAC finds the ExpectedMachine of a BMC MAC (look-ups
// ignore case), or nil.
func expectedMachineByMAC(db *gorm.DB, mac string) (*models.ExpectedMachine, error) {
	if mac == "" {
		return nil, nil
	}
	var em models.ExpectedMachine
	err := db.Where("LOWER(bmc_mac_address) = ?", strings.ToLower(mac)).Take(&em).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &em, nil
}

// ExpectedDPUBySerial finds, with db, the ExpectedDpu of a serial
// (globally unique), or nil.
func ExpectedDPUBySerial(db *gorm.DB, serial string) (*models.ExpectedDPU, error) {
	var d models.ExpectedDPU
	err := db.Where("serial_number = ?", serial).Take(&d).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// listsSerial tells whether an ExpectedMachine names serial, in its
// expected_dpus (declared) or in fallback_dpu_serial_numbers.
func listsSerial(db *gorm.DB, em *models.ExpectedMachine, serial string) (bool, error) {
	var n int64
	if err := db.Model(&models.ExpectedDPU{}).Where("expected_machine_id = ? AND serial_number = ?", em.ID, serial).Count(&n).Error; err != nil {
		return false, err
	}
	if n > 0 {
		return true, nil
	}
	var fallback []string
	_ = json.Unmarshal([]byte(em.FallbackDPUSerialNumbers), &fallback)
	for _, s := range fallback {
		if strings.TrimSpace(s) == serial {
			return true, nil
		}
	}
	return false, nil
}

var machineIDRE = regexp.MustCompile(`^fm100(ds|ht)[a-z2-7]{52}$`)

// checkMachineCursor refuses a cursor that no machine list returned (every
// cursor is a machine_id) with 422 invalid.
func checkMachineCursor(cursor string) error {
	if cursor != "" && !machineIDRE.MatchString(cursor) {
		return fault.Errf(fault.CodeInvalid, "cursor", "cursor %q is not one this API returned", cursor)
	}
	return nil
}
