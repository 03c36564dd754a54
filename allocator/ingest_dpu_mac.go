package allocator

import (
	"fmt"
	"strings"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/ident"
	"github.com/ipledger/ipledger/models"
)

// A DPU's BMC MAC address (docs/api.md "Machines",
// docs/decisions.md "A DPU's BMC MAC shares the hosts' column"): optional
// in a report, stored in machines.bmc_mac_address in ident.ParseMAC's
// canonical spelling, one machine per BMC MAC whatever its kind (the
// unique key machines_bmc_mac_key).

// reportDPUMACs validates the BMC MACs of a report's DPUs: each is absent
// (empty or blank) or a MAC ident.ParseMAC reads, and no BMC MAC is named
// twice in one report (the host's included). It returns the canonical
// MAC of each DPU by position ("" when absent).
func reportDPUMACs(hostMAC string, dpus []ReportDPU) ([]string, error) {
	out := make([]string, len(dpus))
	at := map[string]string{hostMAC: "bmc_mac_address"}
	for i, d := range dpus {
		if strings.TrimSpace(d.BmcMacAddress) == "" {
			continue
		}
		field := fmt.Sprintf("dpus[%d].bmc_mac_address", i)
		m, err := ident.ParseMAC(d.BmcMacAddress)
		if err != nil {
			return nil, fault.Errf(fault.CodeInvalid, field, "bmc_mac_address %q is not a MAC address: want %s", d.BmcMacAddress, ident.MACRule)
		}
		if first, ok := at[m]; ok {
			return nil, fault.Errf(fault.CodeInvalid, field, "bmc_mac_address %q is also %s of this report: each BMC has its own MAC address", d.BmcMacAddress, first)
		}
		at[m] = field
		out[i] = m
	}
	return out, nil
}

// bmcMACFree is nil when no machine but id has this BMC MAC, else the 409
// of bmcMACTaken.
func (t *tx) bmcMACFree(mac, id string) error {
	var n int64
	if err := t.Model(&models.Machine{}).Where("bmc_mac_address = ? AND machine_id <> ?", mac, id).Count(&n).Error; err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	return t.bmcMACTaken(mac, id)
}

// bmcMACTaken is the 409 conflict (field bmc_mac_address) of a machine
// that cannot have this BMC MAC because another machine has it, naming
// that machine.
func (t *tx) bmcMACTaken(mac, id string) error {
	var other models.Machine
	if err := t.Where("bmc_mac_address = ? AND machine_id <> ?", mac, id).Take(&other).Error; err != nil {
		return fmt.Errorf("machine %s: insert ignored, but no other machine has BMC MAC %s: %w", id, mac, err)
	}
	return fault.Errf(fault.CodeConflict, "bmc_mac_address", "bmc_mac_address %s is already the BMC MAC address of %s; one BMC MAC belongs to one machine",
		mac, machineRowLabel(t.DB, &other))
}
