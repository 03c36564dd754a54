package allocator

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"

	"golang.org/x/text/unicode/norm"
	"gorm.io/gorm"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/ident"
	"github.com/ipledger/ipledger/models"
)

// Operators recognise hardware by names, not hashes. This file is the one
// place that decides what an object is called on every page, in every
// flash message and in the errors that name a machine:
//
//   - a host is its ExpectedMachine's metadata.name, else its chassis
//     serial, else its BMC MAC address;
//   - a DPU is its serial number;
//   - an ExpectedMachine is its metadata.name, else its BMC MAC address.
//
// The machine_id stays beside the name (shortened on pages, in full where
// it is copied), so the name is for reading and the id for tools. It is
// derived from the hardware too (DPUMachineID, HostMachineID), so the same
// machine keeps its id whenever it is reported.

var b32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// DPUMachineID derives a DPU's machine_id from its serial number, so the
// same hardware gets the same id whenever it is ingested: "fm100ds" and the
// lower-case base32 of the SHA-256 of the trimmed serial (59 characters).
func DPUMachineID(serial string) string {
	h := sha256.Sum256([]byte(strings.TrimSpace(serial)))
	return "fm100ds" + b32.EncodeToString(h[:])
}

// HostMachineID derives a host's machine_id from its BMC MAC address
// (normalized lower-case with ':'), so a host reported again keeps its id.
func HostMachineID(bmcMAC string) string {
	h := sha256.Sum256([]byte("host:" + strings.ToLower(strings.TrimSpace(bmcMAC))))
	return "fm100ht" + b32.EncodeToString(h[:])
}

// HostName names a host: the ExpectedMachine's name, else the chassis
// serial, else the BMC MAC address, else the machine_id.
func HostName(emName, chassis, mac, machineID string) string {
	for _, s := range []string{emName, chassis, mac} {
		if s = strings.TrimSpace(s); s != "" {
			return s
		}
	}
	return machineID
}

// DPUName names a DPU: its serial number, else the machine_id given.
func DPUName(serial, machineID string) string {
	if serial != "" {
		return serial
	}
	return machineID
}

// ExpectedMachineName names an ExpectedMachine: its metadata.name, else its
// BMC MAC address.
func ExpectedMachineName(name, mac string) string {
	if s := strings.TrimSpace(name); s != "" {
		return s
	}
	return mac
}

// ConfirmPhrase is what a force delete of m asks the operator to type: the
// host's ExpectedMachine name, or its BMC MAC address when it has none (a
// DPU without a host: its serial). It is a name the operator reads off the
// hardware or the rack plan, not a hash to copy and paste.
func ConfirmPhrase(m *Machine) string {
	if m.Kind == KindDPU {
		return m.SerialNumber
	}
	if m.EMName != "" {
		return m.EMName
	}
	if m.BmcMacAddress != nil {
		return *m.BmcMacAddress
	}
	return m.MachineID
}

// ConfirmMatches reports whether typed confirms a force delete of m: the
// phrase (surrounding blanks ignored) compared in Unicode normal form C, so
// a name typed with decomposed accents (as some keyboards and pastes send
// it) matches the name stored composed; m's machine_id; and a BMC MAC
// address in either case and with either separator (ident.ParseMAC).
func ConfirmMatches(m *Machine, typed string) bool {
	want := ConfirmPhrase(m)
	typed = strings.TrimSpace(typed)
	if typed == "" {
		return false
	}
	if norm.NFC.String(typed) == norm.NFC.String(want) || typed == m.MachineID {
		return true
	}
	if m.Kind == KindHost && m.EMName == "" {
		if mac, err := ident.ParseMAC(typed); err == nil && m.BmcMacAddress != nil && mac == *m.BmcMacAddress {
			return true
		}
	}
	return false
}

// MachineNamesOf returns the display name of each machine_id given (hosts
// by the host rule, DPUs by serial), read with db inside a read or a
// transaction; ids that are not machines are left out, kinds maps each id
// found to its kind (host or dpu).
func MachineNamesOf(db *gorm.DB, ids []string) (names, kinds map[string]string, err error) {
	return machineNamesKnown(db, ids, nil)
}

// machineNamesKnown is MachineNamesOf with the rows of known taken as
// they are instead of read (machines a statement is about to store); it
// names them too.
func machineNamesKnown(db *gorm.DB, ids []string, known []models.Machine) (names, kinds map[string]string, err error) {
	out, kinds := map[string]string{}, map[string]string{}
	rows := append([]models.Machine(nil), known...)
	found := make(map[string]bool, len(ids))
	for _, m := range known {
		found[m.MachineID] = true
	}
	var missing []string
	for _, id := range ids {
		if !found[id] {
			found[id] = true // asked once
			missing = append(missing, id)
		}
	}
	read := len(rows)
	for start := 0; start < len(missing); start += 500 {
		var chunk []models.Machine
		if err := db.Where("machine_id IN ?", missing[start:min(start+500, len(missing))]).Find(&chunk).Error; err != nil {
			return nil, nil, err
		}
		rows = append(rows, chunk...)
	}
	em, err := emNamesByMAC(db, rows)
	if err != nil {
		return nil, nil, err
	}
	if len(rows)-read < len(missing) {
		// Machines deleted since are named as they were then.
		var gone []models.DeletedMachine
		for start := 0; start < len(missing); start += 500 {
			var chunk []models.DeletedMachine
			if err := db.Where("machine_id IN ?", missing[start:min(start+500, len(missing))]).Find(&chunk).Error; err != nil {
				return nil, nil, err
			}
			gone = append(gone, chunk...)
		}
		for _, g := range gone {
			out[g.MachineID], kinds[g.MachineID] = g.Name, g.Kind
		}
	}
	for _, m := range rows {
		kinds[m.MachineID] = m.Kind
		if m.Kind == KindDPU {
			out[m.MachineID] = DPUName(deref(m.SerialNumber), "")
			continue
		}
		out[m.MachineID] = HostName(em[deref(m.BmcMacAddress)], m.ChassisSerialNumber, deref(m.BmcMacAddress), m.MachineID)
	}
	return out, kinds, nil
}

// emNamesByMAC maps the BMC MAC of each host row to its ExpectedMachine's
// metadata.name (hosts without one are absent).
func emNamesByMAC(db *gorm.DB, rows []models.Machine) (map[string]string, error) {
	out := map[string]string{}
	var macs []string
	for _, m := range rows {
		if m.Kind == KindHost && m.BmcMacAddress != nil {
			macs = append(macs, *m.BmcMacAddress)
		}
	}
	if len(macs) == 0 {
		return out, nil
	}
	var ems []models.ExpectedMachine
	if err := db.Select("bmc_mac_address", "metadata_name").Where("bmc_mac_address IN ?", macs).Find(&ems).Error; err != nil {
		return nil, err
	}
	for _, em := range ems {
		if em.MetadataName != "" {
			out[strings.ToLower(em.BmcMacAddress)] = em.MetadataName
		}
	}
	return out, nil
}

// machineRowLabel names a machine row in messages the way pages do, with
// its machine_id for tools: "host rack7-u12 (fm100ht…)", "DPU MT2242X00001
// (fm100ds…)".
func machineRowLabel(db *gorm.DB, m *models.Machine) string {
	if m.Kind == KindDPU {
		return machineLabel(m.MachineID, deref(m.SerialNumber))
	}
	names, err := emNamesByMAC(db, []models.Machine{*m})
	if err != nil {
		names = map[string]string{}
	}
	n := HostName(names[deref(m.BmcMacAddress)], m.ChassisSerialNumber, deref(m.BmcMacAddress), m.MachineID)
	if n == m.MachineID {
		return "host " + n
	}
	return "host " + n + " (" + m.MachineID + ")"
}

// keepNames records the names the machines ids have now, before they are
// deleted, so every page and message still names them after (the
// deleted_machines table).
func (t *tx) keepNames(ids []string) error {
	names, kinds, err := MachineNamesOf(t.DB, ids)
	if err != nil {
		return err
	}
	var rows []models.Machine
	if err := t.Where("machine_id IN ?", ids).Find(&rows).Error; err != nil {
		return err
	}
	if err := t.Where("machine_id IN ?", ids).Delete(&models.DeletedMachine{}).Error; err != nil {
		return err
	}
	for _, m := range rows {
		name := names[m.MachineID]
		if name == "" {
			name = m.MachineID
		}
		d := models.DeletedMachine{MachineID: m.MachineID, Kind: kinds[m.MachineID], Name: name, HostMachineID: m.HostMachineID,
			DeletedAt: t.now, DeletedBy: audit.ActorFrom(t.ctx).Name}
		if err := t.Create(&d).Error; err != nil {
			return err
		}
	}
	return nil
}
