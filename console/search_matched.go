package console

import (
	"strings"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/models"
)

// machineMatched says which field of a machine holds the text in one of
// its forms (lower case, models.SearchForms, as partial's substring scan
// found it), or in its BMC MAC one of macs: a DPU's serial or a host's
// chassis serial, its BMC MAC, or its machine_id. The label names the
// field that matched, never another one the machine happens to have.
func machineMatched(m *models.Machine, forms, macs []string) string {
	has := func(v string) bool { return models.ContainsForm(v, forms) }
	dpu := m.Kind == allocator.KindDPU
	switch {
	case dpu && has(deref(m.SerialNumber)):
		return "DPU serial " + deref(m.SerialNumber)
	case !dpu && has(m.ChassisSerialNumber):
		return "chassis serial " + m.ChassisSerialNumber
	case dpu && hasAny(deref(m.BmcMacAddress), macs):
		return "DPU BMC MAC " + deref(m.BmcMacAddress)
	case hasAny(deref(m.BmcMacAddress), macs):
		return "BMC MAC " + deref(m.BmcMacAddress)
	case has(m.MachineID):
		return "machine_id " + m.MachineID
	}
	return "chassis serial " + m.ChassisSerialNumber
}

// hasAny reports whether the stored MAC v holds one of macs (lower case).
func hasAny(v string, macs []string) bool {
	for _, m := range macs {
		if v != "" && strings.Contains(strings.ToLower(v), m) {
			return true
		}
	}
	return false
}
