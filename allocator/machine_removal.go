package allocator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

// Decommission takes a ready host (with its DPUs), or a DPU that has no
// host, out of service: state → decommissioned. Its values stay allocated
// until it is deleted. Not ready: 409 conflict; a DPU under a host: 409
// conflict (decommission the host); unknown: 404.
func (a *Allocator) Decommission(ctx context.Context, id string) (*Machine, error) {
	var out *Machine
	err := a.write(ctx, func(t *tx) error {
		if _, err := t.lockPools(PoolLoopbackV4, PoolLoopbackV6); err != nil {
			return err
		}
		row, err := findMachine(t.DB, id)
		if err != nil {
			return err
		}
		if row.Kind == KindDPU && row.HostMachineID != nil {
			return fault.Errf(fault.CodeConflict, "", "DPU %s belongs to host %s; decommission the host", row.MachineID, *row.HostMachineID)
		}
		if row.State != StateReady {
			return fault.Errf(fault.CodeConflict, "", "%s is %s, not ready", machineRowLabel(t.DB, row), row.State)
		}
		var dpus []models.Machine
		if err := t.Where("host_machine_id = ?", row.MachineID).Order("serial_number").Find(&dpus).Error; err != nil {
			return err
		}
		for _, m := range append([]models.Machine{*row}, dpus...) {
			if m.State != StateReady {
				continue
			}
			before := machineAudit(&m)
			res := t.Model(&models.Machine{}).Where("machine_id = ? AND version = ?", m.MachineID, m.Version).
				Updates(map[string]any{"state": StateDecommissioned, "version": m.Version + 1, "updated_at": t.now})
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected != 1 {
				return fault.Errf(fault.CodeStaleVersion, "", "machine %s changed meanwhile", m.MachineID)
			}
			m.State, m.Version = StateDecommissioned, m.Version+1
			if err := t.audit("machine.decommission", "machine", m.MachineID, before, machineAudit(&m)); err != nil {
				return err
			}
		}
		if err := t.Where("machine_id = ?", row.MachineID).Take(row).Error; err != nil {
			return err
		}
		ms, err := t.a.MachinesOf(t.ctx, t.DB, []models.Machine{*row})
		if err != nil {
			return err
		}
		out = &ms[0]
		return nil
	})
	return out, err
}

// Delete-impact actions (docs/api.md).
const (
	ActionRelease             = "release"
	ActionReturnToReservation = "return_to_reservation"
	ActionQuarantine          = "quarantine"
)

// ImpactValue is what a delete does to one value.
type ImpactValue struct {
	Pool   string `json:"pool"`
	Value  string `json:"value"`
	Action string `json:"action"`
	Reason string `json:"reason"`
	// owner and serial are kept for applying the delete.
	owner  Owner
	serial string
}

// DeleteImpact is the answer of GET /api/v1/machines/{id}/delete-impact.
type DeleteImpact struct {
	MachineID string        `json:"machine_id"`
	Force     bool          `json:"force"`
	Values    []ImpactValue `json:"values"`
	Warning   string        `json:"warning"`
}

// DeleteImpact previews DeleteMachine: per value the machine (a host with
// its DPUs, or a host-less DPU) holds, in any pool, whether it is released,
// returned to its reservation (declared by an ExpectedDpu for that DPU's
// serial) or quarantined (force delete of a machine that is not
// decommissioned), and a warning saying what the hardware may still carry.
func (a *Allocator) DeleteImpact(ctx context.Context, id string, force bool) (*DeleteImpact, error) {
	var out *DeleteImpact
	err := a.read(ctx, func(db *gorm.DB) error {
		row, err := findMachine(db, id)
		if err != nil {
			return err
		}
		out, err = a.impactOf(db, row, force)
		return err
	})
	return out, err
}

// impactOf computes the delete impact of row (inside the delete's
// transaction when it is applied).
func (a *Allocator) impactOf(db *gorm.DB, row *models.Machine, force bool) (*DeleteImpact, error) {
	members := []models.Machine{*row}
	if row.Kind == KindHost {
		var dpus []models.Machine
		if err := db.Where("host_machine_id = ?", row.MachineID).Order("serial_number").Find(&dpus).Error; err != nil {
			return nil, err
		}
		members = append(members, dpus...)
	}
	byID := map[string]*models.Machine{}
	ids := make([]string, 0, len(members))
	for i := range members {
		byID[members[i].MachineID] = &members[i]
		ids = append(ids, members[i].MachineID)
	}
	type held struct {
		models.Allocation
		PoolName string
	}
	var rows []held
	if err := db.Raw(`SELECT a.*, p.name AS pool_name FROM allocations a JOIN pools p ON p.id = a.pool_id
		WHERE a.state = ? AND a.owner_type = ? AND a.owner_id IN ? ORDER BY p.name, a.value_key`,
		models.StateAllocated, OwnerTypeMachine, ids).Scan(&rows).Error; err != nil {
		return nil, err
	}
	quarantine := force && row.State != StateDecommissioned
	imp := &DeleteImpact{MachineID: row.MachineID, Force: force, Values: []ImpactValue{}}
	var released, returned, quarantined, carried []string
	for _, h := range rows {
		m := byID[deref(h.OwnerID)]
		serial := deref(m.SerialNumber)
		// The reason names the holder as pages do (names.go); the
		// machine_id is beside it in the API answer's machine_id.
		who := "host " + m.MachineID
		if serial != "" {
			who = "DPU " + serial
		} else if m.MachineID == row.MachineID {
			who = machineRowLabel(db, m)
		}
		v := ImpactValue{Pool: h.PoolName, Value: h.Value, owner: Owner{Type: OwnerTypeMachine, ID: m.MachineID}, serial: serial}
		declared := ""
		if col := reservationColumn(h.PoolName); col != "" && serial != "" {
			var d models.ExpectedDPU
			err := db.Where(col+" = ?", h.ValueKey).Take(&d).Error
			if err == nil {
				declared = d.SerialNumber
			} else if !errors.Is(err, gorm.ErrRecordNotFound) {
				return nil, err
			}
		}
		switch {
		case declared != "" && declared == serial:
			v.Action = ActionReturnToReservation
			v.Reason = fmt.Sprintf("declared by an ExpectedDpu for %s: free again in its reserved range, reachable only by that DPU, which gets it back when ingested again", who)
			returned = append(returned, h.Value)
		case quarantine:
			v.Action = ActionQuarantine
			v.Reason = fmt.Sprintf("held by %s, which is not decommissioned: the hardware may still carry it, so it is quarantined (never handed out automatically) until an admin unquarantines it or the same hardware is ingested again", who)
			quarantined = append(quarantined, h.Value)
		default:
			v.Action = ActionRelease
			v.Reason = fmt.Sprintf("held by %s: free again", who)
			if row.State == StateDecommissioned {
				v.Reason = fmt.Sprintf("held by %s, decommissioned: free again", who)
			}
			released = append(released, h.Value)
		}
		if reservationColumn(h.PoolName) != "" {
			carried = append(carried, h.Value)
		}
		imp.Values = append(imp.Values, v)
	}
	var w []string
	if row.State != StateDecommissioned && !force {
		w = append(w, fmt.Sprintf("The %s is %s: deleting it requires decommissioning it first, or a force delete (admin).", machineRowLabel(db, row), row.State))
	}
	if quarantine {
		w = append(w, fmt.Sprintf("Force delete of %s, which is not decommissioned.", machineRowLabel(db, row)))
	}
	if len(carried) > 0 && row.State != StateDecommissioned {
		w = append(w, "The hardware may still carry its loopbacks: "+strings.Join(carried, ", ")+".")
	}
	if len(quarantined) > 0 {
		w = append(w, fmt.Sprintf("%d value(s) go to quarantine: %s.", len(quarantined), strings.Join(quarantined, ", ")))
	}
	if len(returned) > 0 {
		w = append(w, fmt.Sprintf("%d value(s) return to their reservation: %s.", len(returned), strings.Join(returned, ", ")))
	}
	if len(released) > 0 {
		w = append(w, fmt.Sprintf("%d value(s) are released: %s.", len(released), strings.Join(released, ", ")))
	}
	if len(imp.Values) == 0 {
		w = append(w, "The machine holds no value.")
	}
	imp.Warning = strings.Join(w, " ")
	return imp, nil
}

// DeleteMachine deletes a machine permanently (a host with its DPUs, or a
// host-less DPU) and applies its delete impact in the same transaction:
// values declared for the DPU's serial return to their reservation, the
// others are released — or, on a force delete of a machine that is not
// decommissioned, quarantined with reason, time and former owner.
// Without force the machine must be decommissioned (409 conflict); force
// is for admins (checked by the caller's role). A DPU under a host is 409
// conflict (delete the host). It returns the impact applied.
func (a *Allocator) DeleteMachine(ctx context.Context, id string, force bool) (*DeleteImpact, error) {
	var out *DeleteImpact
	err := a.write(ctx, func(t *tx) error {
		row, err := findMachine(t.DB, id)
		if err != nil {
			return err
		}
		// Lock the loopback pools and every pool the machine holds a value
		// in, all at once in name order, before touching anything.
		var names []string
		if err := t.Raw(`SELECT DISTINCT p.name FROM allocations a JOIN pools p ON p.id = a.pool_id
			WHERE a.owner_type = ? AND (a.owner_id = ? OR a.owner_id IN (SELECT machine_id FROM machines WHERE host_machine_id = ?))`,
			OwnerTypeMachine, row.MachineID, row.MachineID).Scan(&names).Error; err != nil {
			return err
		}
		pools, err := t.lockPools(append(names, PoolLoopbackV4, PoolLoopbackV6)...)
		if err != nil {
			return err
		}
		if err := t.Where("machine_id = ?", row.MachineID).Take(row).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return fault.Errf(fault.CodeNotFound, "", "machine %q does not exist", id)
			}
			return err
		}
		if row.Kind == KindDPU && row.HostMachineID != nil {
			return fault.Errf(fault.CodeConflict, "", "DPU %s belongs to host %s; delete the host", row.MachineID, *row.HostMachineID)
		}
		if row.State != StateDecommissioned && !force {
			return fault.Errf(fault.CodeConflict, "", "%s is %s: decommission it first, or force delete it (admin)", machineRowLabel(t.DB, row), row.State)
		}
		imp, err := t.a.impactOf(t.DB, row, force)
		if err != nil {
			return err
		}
		for _, v := range imp.Values {
			p := pools[v.Pool]
			if p == nil {
				// Its pool name was read before locking; a concurrent
				// change is retried by the caller.
				return fault.Errf(fault.CodeConflict, "", "pool %q of %s changed meanwhile; retry", v.Pool, v.Value)
			}
			sp := spaceOf(p)
			key, err := sp.parse(v.Value)
			if err != nil {
				return err
			}
			switch v.Action {
			case ActionQuarantine:
				var al models.Allocation
				if err := t.Where("pool_id = ? AND value_key = ?", p.ID, key.key()).Take(&al).Error; err != nil {
					return err
				}
				reason := fmt.Sprintf("force delete of %s by %s: the hardware may still carry it", machineLabel(v.owner.ID, v.serial), audit.ActorFrom(t.ctx).Name)
				if err := t.quarantine(p, &al, reason); err != nil {
					return err
				}
			default:
				if err := t.release(p, key, v.owner); err != nil {
					return err
				}
			}
		}
		var members []models.Machine
		// The host first, then its DPUs by id: the audit events follow
		// this order, which must not depend on the plan the database picks.
		if err := t.Where("machine_id = ? OR host_machine_id = ?", row.MachineID, row.MachineID).
			Order("host_machine_id IS NOT NULL, machine_id").Find(&members).Error; err != nil {
			return err
		}
		ids := make([]string, 0, len(members))
		for _, m := range members {
			ids = append(ids, m.MachineID)
		}
		if err := t.keepNames(ids); err != nil {
			return err
		}
		if err := t.Where("machine_id IN ?", ids).Delete(&models.NetworkConfig{}).Error; err != nil {
			return err
		}
		if err := t.Where("host_machine_id = ?", row.MachineID).Delete(&models.Machine{}).Error; err != nil {
			return err
		}
		if err := t.Where("machine_id = ?", row.MachineID).Delete(&models.Machine{}).Error; err != nil {
			return err
		}
		action := "machine.delete"
		if force && row.State != StateDecommissioned {
			action = "machine.force_delete"
		}
		for _, m := range members {
			var after any
			if m.MachineID == row.MachineID {
				after = imp
			}
			if err := t.audit(action, "machine", m.MachineID, machineAudit(&m), after); err != nil {
				return err
			}
		}
		out = imp
		return nil
	})
	return out, err
}

func machineLabel(id, serial string) string {
	if serial != "" {
		return fmt.Sprintf("DPU %s (%s)", serial, id)
	}
	return "machine " + id
}
