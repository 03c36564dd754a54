package allocator

import (
	"gorm.io/gorm"

	"github.com/ipledger/ipledger/models"
)

// ownerText names an allocation's owner in a message as operators know
// it: a DPU by its serial and its host's name, a host by its name (never
// the machine_id hash); an owner that is no known machine as type/id.
func ownerText(db *gorm.DB, typ, id *string) string {
	s := deref(typ) + "/" + deref(id)
	if deref(typ) != OwnerTypeMachine || deref(id) == "" {
		return s
	}
	var rows []models.Machine
	if err := db.Where("machine_id = ?", *id).Limit(1).Find(&rows).Error; err != nil {
		return s
	}
	if len(rows) == 0 {
		var gone []models.DeletedMachine
		if err := db.Where("machine_id = ?", *id).Limit(1).Find(&gone).Error; err != nil || len(gone) == 0 {
			return s
		}
		if gone[0].Kind == KindDPU {
			return "DPU " + gone[0].Name + " (deleted)"
		}
		return "host " + gone[0].Name + " (deleted)"
	}
	m := rows[0]
	ids := []string{m.MachineID}
	if m.HostMachineID != nil {
		ids = append(ids, *m.HostMachineID)
	}
	names, _, err := MachineNamesOf(db, ids)
	if err != nil || names[m.MachineID] == "" {
		return s
	}
	if m.Kind != KindDPU {
		return "host " + names[m.MachineID]
	}
	out := "DPU " + names[m.MachineID]
	if m.HostMachineID != nil && names[*m.HostMachineID] != "" {
		out += " of host " + names[*m.HostMachineID]
	}
	return out
}
