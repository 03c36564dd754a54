package console

import (
	"strings"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/ident"
	"github.com/ipledger/ipledger/models"
)

// partial looks for q inside ExpectedMachine names, MACs, chassis and DPU
// serials (the list page's search) and inside machine serials, chassis
// serials, ids and BMC MACs (hosts' and DPUs'); they run only when nothing
// matched exactly, and read the machine tables, never the allocations.
// Part of a MAC in any notation (00-50-0, 0050.0, 00500) is also looked
// for in the stored ':' spelling (ident.MACFragments), while the text as
// typed may be part of a name or serial (rack-10-20). On PostgreSQL with
// pg_trgm each substring test is answered from a trigram index
// (models.SearchIndexes); without it, and on SQLite, it scans them.
func (s *searcher) partial(q string) error {
	page, err := s.c.a.ListExpectedMachines(s.ctx, allocator.ExpectedMachineFilter{Search: q, Limit: searchLimit})
	if err != nil {
		return err
	}
	lq := strings.ToLower(q)
	forms := models.SearchForms(lq)
	macs := []string{lq}
	for _, f := range ident.MACFragments(q) {
		if f != lq {
			macs = append(macs, f)
		}
	}
	for _, em := range page.Items {
		// An ingested ExpectedMachine is its host (as for exact matches).
		var hosts []models.Machine
		if err := s.db.Where("bmc_mac_address = ? AND kind = ?", em.BmcMacAddress, allocator.KindHost).Limit(1).Find(&hosts).Error; err != nil {
			return err
		}
		if len(hosts) > 0 {
			s.add(SearchHit{Kind: HitHost, ID: hosts[0].MachineID, Detail: emMatched(&em, forms, macs)})
			continue
		}
		s.add(SearchHit{Kind: HitExpectedMachine, ID: em.ID, Name: allocator.ExpectedMachineName(em.Metadata.Name, em.BmcMacAddress),
			Detail: emMatched(&em, forms, macs) + ", not ingested yet"})
	}
	if page.NextCursor != "" {
		s.res.More = true
	}
	var conds []string
	var args []any
	substr := func(col, needle string) {
		cond, arg := models.Contains(s.c.a.Dialect(), col, needle)
		conds, args = append(conds, cond), append(args, arg)
	}
	for _, col := range []string{"machine_id", "serial_number", "chassis_serial_number"} {
		for _, form := range forms {
			substr(col, form)
		}
	}
	for _, m := range macs {
		substr("bmc_mac_address", m)
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
		s.add(SearchHit{Kind: kind, ID: m.MachineID, Detail: machineMatched(&m, forms, macs)})
	}
	return nil
}

// emMatched says which field of an ExpectedMachine holds the text in one
// of its forms (lower case, models.SearchForms) or its BMC MAC one of macs
// (as ListExpectedMachines' search found it): its name, BMC MAC, chassis
// serial or an expected DPU's serial.
func emMatched(em *allocator.ExpectedMachine, forms, macs []string) string {
	has := func(v string) bool { return models.ContainsForm(v, forms) }
	switch {
	case has(em.Metadata.Name):
		return "name " + em.Metadata.Name
	case hasAny(em.BmcMacAddress, macs):
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
