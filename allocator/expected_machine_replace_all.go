package allocator

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/google/uuid"
	"gorm.io/gorm/clause"

	"github.com/ipledger/ipledger/models"
)

// ReplaceAllExpectedMachines makes the stored ExpectedMachines exactly the
// given list (PUT /api/v1/expected-machines, the NICo file), atomically:
// every record is validated first, against the final state (two records
// may swap reservations), and one bad record changes nothing; the error's
// field names the record (expected_machines[3].expected_dpus[0].loopback_ip).
// A record whose BMC MAC is stored keeps its id (and, when it leaves them
// out, its expected_dpus and password); stored records absent from the
// list are deleted. It returns the records in list order.
func (a *Allocator) ReplaceAllExpectedMachines(ctx context.Context, specs []ExpectedMachineSpec) ([]ExpectedMachine, error) {
	var out []ExpectedMachine
	err := a.writeOnConn(ctx, func(t *tx) error {
		if err := t.prepareEM(); err != nil {
			return err
		}
		var stored []models.ExpectedMachine
		q := t.DB
		if t.a.dialect == models.Postgres {
			q = q.Clauses(clause.Locking{Strength: "UPDATE"})
		}
		if err := q.Order("bmc_mac_address").Find(&stored).Error; err != nil {
			return err
		}
		byMAC := map[string]*models.ExpectedMachine{}
		for i := range stored {
			byMAC[stored[i].BmcMacAddress] = &stored[i]
		}
		var ps problems
		recs := make([]*emRecord, len(specs))
		for i, s := range specs {
			recs[i] = normalize(fmt.Sprintf("expected_machines[%d]", i), s, &ps)
		}
		var storedDpus map[string][]models.ExpectedDpu // loaded when a record keeps its list
		replaced := map[string]bool{}
		for _, st := range stored {
			replaced[st.ID] = true
		}
		for _, r := range recs {
			cur := byMAC[r.mac]
			if cur == nil {
				continue
			}
			r.selfID = cur.ID
			if !r.dpusGiven {
				if storedDpus == nil {
					storedDpus = map[string][]models.ExpectedDpu{}
					var all []models.ExpectedDpu
					if err := t.Order("expected_machine_id, position").Find(&all).Error; err != nil {
						return err
					}
					for _, d := range all {
						storedDpus[d.ExpectedMachineID] = append(storedDpus[d.ExpectedMachineID], d)
					}
				}
				for _, k := range storedDpus[cur.ID] {
					d := emDpu{field: r.f("expected_dpus"), serial: k.SerialNumber, kept: true}
					if k.LoopbackIP != nil {
						d.v4, _ = netip.ParseAddr(*k.LoopbackIP)
					}
					if k.LoopbackIPv6 != nil {
						d.v6, _ = netip.ParseAddr(*k.LoopbackIPv6)
					}
					r.dpus = append(r.dpus, d)
				}
			}
		}
		if len(ps) == 0 {
			if err := t.validateRecords(recs, replaced, true, &ps); err != nil {
				return err
			}
		}
		if err := ps.first(); err != nil {
			return err
		}
		// Write: remove records absent from the list, then the DPU rows of
		// every record that gives its list (so values may move between
		// records), then every record, set-based (expected_machine_bulk.go).
		inFile := map[string]bool{}
		for _, r := range recs {
			inFile[r.mac] = true
		}
		b := &emBulk{t: t}
		var gone []models.ExpectedMachine
		for i := range stored {
			if !inFile[stored[i].BmcMacAddress] {
				gone = append(gone, stored[i])
			}
		}
		if err := b.deleteEMs(gone); err != nil {
			return err
		}
		deleted := len(gone)
		var kept []models.ExpectedMachine
		for _, r := range recs {
			if cur := byMAC[r.mac]; cur != nil {
				kept = append(kept, *cur)
			}
		}
		outs, err := expectedMachinesOut(t.DB, kept)
		if err != nil {
			return err
		}
		befores := map[string]*ExpectedMachine{}
		for i := range outs {
			befores[outs[i].ID] = &outs[i]
		}
		// The DPU rows of a record that gives its list are rewritten,
		// unless the list is the stored one exactly (then its rows stay:
		// the final state, validated above, has none of its values
		// elsewhere).
		var rewrite []string
		sameDpus := map[*emRecord]bool{}
		for _, r := range recs {
			if cur := byMAC[r.mac]; cur != nil && r.dpusGiven {
				if sameDpuList(befores[cur.ID].ExpectedDpus, r.dpuList()) {
					sameDpus[r] = true
					continue
				}
				rewrite = append(rewrite, cur.ID)
			}
		}
		if _, err := t.deleteWhereIn("expected_dpus", "expected_machine_id", rewrite); err != nil {
			return err
		}
		created, updated := 0, 0
		out = make([]ExpectedMachine, 0, len(recs))
		for _, r := range recs {
			if cur := byMAC[r.mac]; cur != nil {
				if !r.dpusGiven {
					r.dpus = nil // kept rows stay where they are
				}
				em, changed, err := b.update(cur, befores[cur.ID], r, sameDpus[r])
				if err != nil {
					return err
				}
				if changed {
					updated++
				}
				out = append(out, *em)
				continue
			}
			em, err := b.create(r, uuid.NewString())
			if err != nil {
				return err
			}
			created++
			out = append(out, *em)
		}
		if err := b.flush(); err != nil {
			return err
		}
		return t.audit("expected_machine.replace_all", "expected_machine", "*", nil, map[string]int{
			"records": len(recs), "created": created, "updated": updated, "deleted": deleted, "unchanged": len(recs) - created - updated})
	})
	return out, err
}

// sameDpuList tells whether two DPU lists are equal, in order.
func sameDpuList(a, b []ExpectedDpu) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].SerialNumber != b[i].SerialNumber || deref(a[i].LoopbackIP) != deref(b[i].LoopbackIP) ||
			deref(a[i].LoopbackIPv6) != deref(b[i].LoopbackIPv6) || (a[i].LoopbackIP == nil) != (b[i].LoopbackIP == nil) ||
			(a[i].LoopbackIPv6 == nil) != (b[i].LoopbackIPv6 == nil) {
			return false
		}
	}
	return true
}
