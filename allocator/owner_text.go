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
	names, err := machineOwnerNames(db, []string{*id})
	if err != nil || names[*id] == "" {
		return s
	}
	return names[*id]
}

// machineOwnerNames names each machine_id given as an owner is named
// (ownerText): "DPU MT2242X00001 of host rack7-u12", "host rack7-u12",
// "DPU MT2242X00099 (deleted)". Ids that are no machine, live or deleted,
// are left out. A few queries whatever the number of ids.
func machineOwnerNames(db *gorm.DB, ids []string) (map[string]string, error) {
	out := map[string]string{}
	if len(ids) == 0 {
		return out, nil
	}
	names, kinds, err := MachineNamesOf(db, ids)
	if err != nil {
		return nil, err
	}
	hostOf := map[string]string{}
	var live []string
	for start := 0; start < len(ids); start += 500 {
		var rows []models.Machine
		if err := db.Select("machine_id", "host_machine_id").Where("machine_id IN ?", ids[start:min(start+500, len(ids))]).Find(&rows).Error; err != nil {
			return nil, err
		}
		for _, m := range rows {
			live = append(live, m.MachineID)
			if m.HostMachineID != nil {
				hostOf[m.MachineID] = *m.HostMachineID
			}
		}
	}
	var hosts []string
	for _, h := range hostOf {
		hosts = append(hosts, h)
	}
	hostNames, _, err := MachineNamesOf(db, hosts)
	if err != nil {
		return nil, err
	}
	isLive := map[string]bool{}
	for _, id := range live {
		isLive[id] = true
	}
	for id, n := range names {
		if n == "" || n == id {
			continue // nothing better to call it than its id
		}
		kind := "host "
		if kinds[id] == KindDPU {
			kind = "DPU "
		}
		switch {
		case !isLive[id]:
			out[id] = kind + n + " (deleted)"
		case kinds[id] == KindDPU && hostNames[hostOf[id]] != "":
			out[id] = kind + n + " of host " + hostNames[hostOf[id]]
		default:
			out[id] = kind + n
		}
	}
	return out, nil
}

// nameOwners sets OwnerName on allocations whose owner (or, quarantined,
// former owner) is a machine.
func nameOwners(db *gorm.DB, items []Allocation) error {
	var ids []string
	for _, al := range items {
		if typ, id := al.ownerOrFormer(); typ == OwnerTypeMachine && id != "" {
			ids = append(ids, id)
		}
	}
	names, err := machineOwnerNames(db, ids)
	if err != nil {
		return err
	}
	for i := range items {
		if typ, id := items[i].ownerOrFormer(); typ == OwnerTypeMachine {
			items[i].OwnerName = names[id]
		}
	}
	return nil
}

// ownerOrFormer is the allocation's owner, or its former owner when it
// is quarantined.
func (al *Allocation) ownerOrFormer() (typ, id string) {
	if al.State == models.StateQuarantined {
		return deref(al.FormerOwnerType), deref(al.FormerOwnerID)
	}
	return deref(al.OwnerType), deref(al.OwnerID)
}
