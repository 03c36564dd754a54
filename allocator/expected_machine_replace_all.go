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
		// Every stored DPU row, read once: the lists records keep, the
		// records' views before the write, and what the write removes.
		var storedDPUs []models.ExpectedDPU
		if len(stored) > 0 {
			if err := t.Order("expected_machine_id, position").Find(&storedDPUs).Error; err != nil {
				return err
			}
		}
		dpuRowsOf := map[string][]models.ExpectedDPU{} // runs of storedDPUs, not copies
		for i := 0; i < len(storedDPUs); {
			j, id := i, storedDPUs[i].ExpectedMachineID
			for j < len(storedDPUs) && storedDPUs[j].ExpectedMachineID == id {
				j++
			}
			dpuRowsOf[id] = storedDPUs[i:j:j]
			i = j
		}
		for _, r := range recs {
			cur := byMAC[r.mac]
			if cur == nil {
				continue
			}
			r.selfID = cur.ID
			if !r.dpusGiven {
				for _, k := range dpuRowsOf[cur.ID] {
					d := emDPU{field: r.f("expected_dpus"), serial: k.SerialNumber, kept: true}
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
			// Every stored record is replaced (all): none of their
			// declarations collides, so no set of ids is needed.
			if err := t.validateRecords(recs, nil, true, &ps); err != nil {
				return err
			}
		}
		if err := ps.first(); err != nil {
			return err
		}
		// Write: remove records absent from the list, then the DPU rows of
		// every record that gives its list (so values may move between
		// records), then every record, set-based (expected_machine_bulk.go)
		// in chunks of records: every state in between is part of the
		// final one, which validation accepted, so no constraint can
		// fail half-way, and the rows and events of a chunk are let go
		// once written.
		inFile := map[string]bool{}
		for _, r := range recs {
			inFile[r.mac] = true
		}
		b := &emBulk{t: t}
		outs := expectedMachinesFrom(stored, dpusByMachine(storedDPUs))
		befores := map[string]*ExpectedMachine{}
		for i := range outs {
			befores[outs[i].ID] = &outs[i]
		}
		var gone []models.ExpectedMachine
		var goneViews []ExpectedMachine
		for i := range stored {
			if !inFile[stored[i].BmcMacAddress] {
				gone = append(gone, stored[i])
				goneViews = append(goneViews, outs[i])
			}
		}
		if err := b.deleteEMs(gone, goneViews); err != nil {
			return err
		}
		deleted := len(gone)
		// The DPU rows of a record that gives its list are rewritten,
		// unless the list is the stored one exactly (then its rows stay:
		// the final state, validated above, has none of its values
		// elsewhere).
		var rewrite []string
		rewritten := 0 // their stored DPU rows
		sameDPUs := map[*emRecord]bool{}
		for _, r := range recs {
			if cur := byMAC[r.mac]; cur != nil && r.dpusGiven {
				if sameDPUList(befores[cur.ID].ExpectedDPUs, r.dpuList()) {
					sameDPUs[r] = true
					continue
				}
				rewrite = append(rewrite, cur.ID)
				rewritten += len(dpuRowsOf[cur.ID])
			}
		}
		left := len(storedDPUs)
		for i := range gone {
			left -= len(dpuRowsOf[gone[i].ID])
		}
		if err := t.deleteDPUsOf(rewrite, rewritten == left); err != nil {
			return err
		}
		created, updated := 0, 0
		out = make([]ExpectedMachine, 0, len(recs))
		for _, r := range recs {
			if cur := byMAC[r.mac]; cur != nil {
				if !r.dpusGiven {
					r.dpus = nil // kept rows stay where they are
				}
				em, changed, err := b.update(cur, befores[cur.ID], r, sameDPUs[r])
				if err != nil {
					return err
				}
				if changed {
					updated++
				}
				out = append(out, *em)
				if err := b.flushEvery(emFlushRecords); err != nil {
					return err
				}
				continue
			}
			em, err := b.create(r, uuid.NewString())
			if err != nil {
				return err
			}
			created++
			out = append(out, *em)
			if err := b.flushEvery(emFlushRecords); err != nil {
				return err
			}
		}
		if err := b.flushEvery(1); err != nil {
			return err
		}
		return t.audit("expected_machine.replace_all", "expected_machine", "*", nil, map[string]int{
			"records": len(recs), "created": created, "updated": updated, "deleted": deleted, "unchanged": len(recs) - created - updated})
	})
	return out, err
}

// sameDPUList tells whether two DPU lists are equal, in order.
func sameDPUList(a, b []ExpectedDPU) bool {
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
