package allocator

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

// loopbackFamily ties a family to its pool, its network-config column and
// its ExpectedDpu reservation.
type loopbackFamily struct {
	name   string
	pool   string
	column string
	label  string   // IPv4, IPv6
	typ    PoolType // of its pool
}

var loopbackFamilies = []loopbackFamily{
	{FamilyIPv4, PoolLoopbackV4, "loopback_ip", "IPv4", TypeIPv4},
	{FamilyIPv6, PoolLoopbackV6, "loopback_ip_v6", "IPv6", TypeIPv6},
}

// other is the other family.
func (f loopbackFamily) other() loopbackFamily {
	if f.name == FamilyIPv4 {
		return loopbackFamilies[1]
	}
	return loopbackFamilies[0]
}

// holds tells whether a is an address of this family.
func (f loopbackFamily) holds(a netip.Addr) bool {
	if f.name == FamilyIPv4 {
		return a.Is4()
	}
	return a.Is6()
}

func (f loopbackFamily) active(nc *models.NetworkConfig) *string {
	if f.name == FamilyIPv4 {
		return nc.LoopbackIP
	}
	return nc.LoopbackIPv6
}

func (f loopbackFamily) reserved(d *models.ExpectedDPU) *string {
	if d == nil {
		return nil
	}
	if f.name == FamilyIPv4 {
		return d.LoopbackIP
	}
	return d.LoopbackIPv6
}

func familyOfPool(pool string) (loopbackFamily, bool) {
	for _, f := range loopbackFamilies {
		if f.pool == pool {
			return f, true
		}
	}
	return loopbackFamily{}, false
}

// setLoopback writes one family of a network config with the version
// compare-and-swap (value nil clears it).
func (t *tx) setLoopback(nc *models.NetworkConfig, f loopbackFamily, value *string) error {
	before := map[string]any{"loopback_ip": nc.LoopbackIP, "loopback_ip_v6": nc.LoopbackIPv6, "version": nc.Version}
	res := t.Model(&models.NetworkConfig{}).Where("machine_id = ? AND version = ?", nc.MachineID, nc.Version).
		Updates(map[string]any{f.column: value, "version": nc.Version + 1, "updated_at": t.now})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected != 1 {
		return fault.Errf(fault.CodeStaleVersion, "", "network config of %s changed meanwhile", nc.MachineID)
	}
	nc.Version++
	if f.name == FamilyIPv4 {
		nc.LoopbackIP = value
	} else {
		nc.LoopbackIPv6 = value
	}
	after := map[string]any{"loopback_ip": nc.LoopbackIP, "loopback_ip_v6": nc.LoopbackIPv6, "version": nc.Version}
	return t.audit("network_config.update", "machine", nc.MachineID, before, after)
}

// EnsureLoopbacks is the one shared operation of docs/reservations.md for the DPU
// with this machine_id (or serial number): it creates or completes the
// DPU's ManagedHostNetworkConfig and returns the families it could not
// assign now. Reports, discovery, reconciliation and pool growth all run
// it (inside their own transaction, as ensureLoopbacks).
func (a *Allocator) EnsureLoopbacks(ctx context.Context, dpuID string) ([]Incomplete, error) {
	var out []Incomplete
	err := a.write(ctx, func(t *tx) error {
		pools, err := t.lockPools(PoolLoopbackV4, PoolLoopbackV6)
		if err != nil {
			return err
		}
		row, err := findMachine(t.DB, dpuID)
		if err != nil {
			return err
		}
		if row.Kind != KindDPU {
			return fault.Errf(fault.CodeInvalid, "machine_id", "machine %s is a host; loopbacks belong to its DPUs", row.MachineID)
		}
		if row.State != StateReady {
			return fault.Errf(fault.CodeConflict, "machine_id", "DPU %s is %s", row.MachineID, row.State)
		}
		_, out, err = t.ensureLoopbacks(pools, row)
		return err
	})
	if out == nil {
		out = []Incomplete{}
	}
	return out, err
}

// ensureLoopbacks applies the lifecycle rows of docs/reservations.md to one DPU,
// each family independently, with lo-ip / lo-ip-v6 already locked:
//   - a value the DPU already holds is kept (never readdressed), whatever
//     its reservation says now;
//   - a reservation for its serial → the reserved value through the
//     requested-value path; if that value is unavailable, or the DPU sits
//     under a host whose ExpectedMachine does not list it while another
//     ExpectedMachine declares it, the family stays unassigned (no
//     automatic fallback);
//   - no reservation → the value this machine held when it was force
//     deleted, if it is still quarantined for it, else an automatic value.
//
// It reports whether the network config changed.
func (t *tx) ensureLoopbacks(pools map[string]*models.Pool, dpu *models.Machine) (bool, []Incomplete, error) {
	serial := deref(dpu.SerialNumber)
	owner := Owner{Type: OwnerTypeMachine, ID: dpu.MachineID}
	nc, err := t.networkConfig(dpu.MachineID)
	if err != nil {
		return false, nil, err
	}
	decl, err := ExpectedDPUBySerial(t.DB, serial)
	if err != nil {
		return false, nil, err
	}
	misplaced, err := t.misplacedBy(dpu, decl)
	if err != nil {
		return false, nil, err
	}
	changed := false
	inc := []Incomplete{}
	for _, f := range loopbackFamilies {
		p := pools[f.pool]
		if p == nil {
			continue
		}
		value, problem, err := t.ensureFamily(p, f, owner, serial, f.active(nc), f.reserved(decl), misplaced)
		if err != nil {
			return false, nil, err
		}
		if problem != nil {
			problem.MachineID = dpu.MachineID
			problem.Family = f.name
			inc = append(inc, *problem)
		}
		if deref(value) != deref(f.active(nc)) {
			if err := t.setLoopback(nc, f, value); err != nil {
				return false, nil, err
			}
			changed = true
		}
	}
	return changed, inc, nil
}

// misplacedBy returns the ExpectedMachine that declares the DPU when the
// DPU sits under a host whose own ExpectedMachine lists it neither in
// expected_dpus nor in fallback_dpu_serial_numbers (docs/reservations.md: the
// hardware is not where the site expects it), else nil. A host without an
// ExpectedMachine is never "misplaced": its DPUs are matched by serial.
func (t *tx) misplacedBy(dpu *models.Machine, decl *models.ExpectedDPU) (*models.ExpectedMachine, error) {
	if decl == nil || dpu.HostMachineID == nil {
		return nil, nil
	}
	var host models.Machine
	err := t.Where("machine_id = ?", *dpu.HostMachineID).Take(&host).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	hostEM, err := expectedMachineByMAC(t.DB, deref(host.BmcMacAddress))
	if err != nil || hostEM == nil || hostEM.ID == decl.ExpectedMachineID {
		return nil, err
	}
	lists, err := listsSerial(t.DB, hostEM, deref(dpu.SerialNumber))
	if err != nil || lists {
		return nil, err
	}
	var other models.ExpectedMachine
	if err := t.Where("id = ?", decl.ExpectedMachineID).Take(&other).Error; err != nil {
		return nil, err
	}
	return &other, nil
}

// ensureFamily decides one family's value; it returns the value the DPU
// holds afterwards (nil: unassigned) and, when unassigned, why.
func (t *tx) ensureFamily(p *models.Pool, f loopbackFamily, owner Owner, serial string, active, reserved *string,
	misplaced *models.ExpectedMachine) (*string, *Incomplete, error) {
	var held models.Allocation
	err := t.Where("pool_id = ? AND owner_type = ? AND owner_id = ? AND state = ?", p.ID, owner.Type, owner.ID, models.StateAllocated).Take(&held).Error
	if err == nil {
		return strp(held.Value), nil, nil
	}
	if !errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil, err
	}
	if active != nil {
		// The network config names a value the pool no longer gives this
		// DPU (released by hand): take it back when nobody else has it.
		row, err := t.retake(p, owner, serial, *active)
		if err != nil || row != nil {
			if row != nil {
				return strp(row.Value), nil, nil
			}
			return nil, nil, err
		}
	}
	if reserved != nil {
		if misplaced != nil {
			return nil, &Incomplete{Code: fault.CodeConflict, Message: fmt.Sprintf(
				"DPU %s is declared by ExpectedMachine %s, not by the ExpectedMachine of the host it was reported under; its reserved %s %s is left unassigned until the ExpectedMachines are fixed",
				serial, emLabelOf(misplaced), f.pool, *reserved)}, nil
		}
		row, _, err := t.allocate(p, owner, *reserved)
		if e, ok := fault.AsError(err); ok && (e.Code == fault.CodeNotAvailable || e.Code == fault.CodeConflict || e.Code == fault.CodeInvalid) {
			return nil, &Incomplete{Code: fault.CodeNotAvailable, Message: fmt.Sprintf(
				"reserved %s %s of DPU %s is not available (%s); left unassigned, no automatic fallback", f.pool, *reserved, serial, e.Message)}, nil
		}
		if err != nil {
			return nil, nil, err
		}
		return strp(row.Value), nil, nil
	}
	q, err := t.quarantinedFor(p, owner)
	if err != nil {
		return nil, nil, err
	}
	if q != nil {
		row, err := t.reclaimRow(p, q, owner)
		if err != nil {
			return nil, nil, err
		}
		return strp(row.Value), nil, nil
	}
	// The owner holds nothing in p (looked up above, under p's lock): the
	// automatic allocation need not look again.
	res, err := t.allocateLowestFree(p, []autoOwner{{ctx: t.ctx, owner: owner}}, true)
	var row *models.Allocation
	if err == nil {
		row, err = res[0].row, res[0].err
	}
	if e, ok := fault.AsError(err); ok && e.Code == fault.CodePoolExhausted {
		return nil, &Incomplete{Code: fault.CodePoolExhausted, Message: fmt.Sprintf("DPU %s: %s", serial, e.Message)}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return strp(row.Value), nil, nil
}

// retake gives owner back the value its network config names when that
// value lies in a range of p, is held by nobody and is not declared for
// another DPU; otherwise nil (the caller assigns anew).
func (t *tx) retake(p *models.Pool, owner Owner, serial, value string) (*models.Allocation, error) {
	sp := spaceOf(p)
	v, err := sp.parse(value)
	if err != nil {
		return nil, nil
	}
	var n int64
	if err := t.Model(&models.PoolRange{}).Where("pool_id = ? AND first_key <= ? AND last_key >= ?", p.ID, v.key(), v.key()).Count(&n).Error; err != nil || n == 0 {
		return nil, err
	}
	if taken, err := t.taken(p, v); err != nil || taken {
		return nil, err
	}
	if s, ok, err := t.declaredFor(p, v); err != nil || (ok && s != serial) {
		return nil, err
	}
	return t.insertAllocation(p, v, owner)
}
