package console

import (
	"regexp"
	"strings"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/models"
)

// macFragmentRE is two or more hex octets joined by '-': part of a MAC.
var macFragmentRE = regexp.MustCompile(`^[0-9A-Fa-f]{2}(-[0-9A-Fa-f]{2})+$`)

// partial looks for q inside ExpectedMachine names, MACs, chassis and DPU
// serials (the list page's search) and inside machine serials, chassis
// serials and ids; they run only when nothing matched exactly, and read
// the machine tables, never the allocations. On PostgreSQL with pg_trgm
// each substring test is answered from a trigram index
// (models.SearchIndexes); without it, and on SQLite, it scans them.
func (s *searcher) partial(q string) error {
	if err := s.partialOf(q); err != nil {
		return err
	}
	// Part of a MAC typed with '-' (00-01-03), as some vendors print it,
	// is also looked for in the stored ':' spelling; the text as typed
	// may be part of a name or serial (rack-10-20).
	if macFragmentRE.MatchString(q) {
		return s.partialOf(strings.ToLower(strings.ReplaceAll(q, "-", ":")))
	}
	return nil
}

// partialOf is partial for one spelling of the text.
func (s *searcher) partialOf(q string) error {
	page, err := s.c.a.ListExpectedMachines(s.ctx, allocator.ExpectedMachineFilter{Search: q, Limit: searchLimit})
	if err != nil {
		return err
	}
	for _, em := range page.Items {
		// An ingested ExpectedMachine is its host (as for exact matches).
		var hosts []models.Machine
		if err := s.db.Where("bmc_mac_address = ? AND kind = ?", em.BmcMacAddress, allocator.KindHost).Limit(1).Find(&hosts).Error; err != nil {
			return err
		}
		if len(hosts) > 0 {
			s.add(SearchHit{Kind: HitHost, ID: hosts[0].MachineID, Detail: emMatched(&em, q)})
			continue
		}
		s.add(SearchHit{Kind: HitExpectedMachine, ID: em.ID, Name: allocator.ExpectedMachineName(em.Metadata.Name, em.BmcMacAddress),
			Detail: emMatched(&em, q) + ", not ingested yet"})
	}
	if page.NextCursor != "" {
		s.res.More = true
	}
	lq := strings.ToLower(q)
	var conds []string
	var args []any
	for _, col := range []string{"machine_id", "serial_number", "chassis_serial_number", "bmc_mac_address"} {
		cond, arg := models.Contains(s.c.a.Dialect(), col, lq)
		conds, args = append(conds, cond), append(args, arg)
	}
	var rows []models.Machine
	if err := s.db.Where(strings.Join(conds, " OR "), args...).Order("machine_id").Limit(searchLimit + 1).Find(&rows).Error; err != nil {
		return err
	}
	if len(rows) > searchLimit {
		rows, s.res.More = rows[:searchLimit], true
	}
	for _, m := range rows {
		kind := HitHost
		if m.Kind == allocator.KindDPU {
			kind = HitDPU
		}
		s.add(SearchHit{Kind: kind, ID: m.MachineID, Detail: machineMatched(&m, lq)})
	}
	return nil
}

// emMatched says which field of an ExpectedMachine holds the text q (as
// ListExpectedMachines' search found it): its name, BMC MAC, chassis
// serial or an expected DPU's serial.
func emMatched(em *allocator.ExpectedMachine, q string) string {
	lq := strings.ToLower(q)
	has := func(v string) bool { return v != "" && strings.Contains(strings.ToLower(v), lq) }
	switch {
	case has(em.Metadata.Name):
		return "name " + em.Metadata.Name
	case has(em.BmcMacAddress):
		return "BMC MAC " + em.BmcMacAddress
	case has(em.ChassisSerialNumber):
		return "chassis serial " + em.ChassisSerialNumber
	}
	for _, d := range em.ExpectedDPUs {
		if has(d.SerialNumber) {
			return "expected DPU serial " + d.SerialNumber
		}
	}
	return "ExpectedMachine " + allocator.ExpectedMachineName(em.Metadata.Name, em.BmcMacAddress)
}
