package console

import (
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"

	"github.com/ipledger/ipledger/allocator"
)

// HeldValue is one value a machine holds (or held, when a force delete
// quarantined it) in any pool.
type HeldValue struct {
	Pool          string
	Value         string
	State         string
	OwnerID       string // the machine_id of the host or DPU that holds it
	OwnerName     string
	AllocatedAt   time.Time
	QuarantinedAt *time.Time
	Reason        string
}

// MachineDetail is everything the console's machine page shows about one
// host or DPU, read in one pass: the machine (a host with its DPUs, or a
// DPU), its host when it is a DPU under one, the ExpectedMachine, the
// binding of each DPU, every value it and its DPUs hold in any pool, and
// the newest audit events of the machine, its DPUs, its ExpectedMachine
// and its values.
type MachineDetail struct {
	Machine         allocator.Machine
	Host            *allocator.Machine
	ExpectedMachine *allocator.ExpectedMachine
	Bindings        map[string]allocator.Binding
	Values          []HeldValue
	History         []audit.Event
	// ConfirmPhrase is what a force delete asks to type (names.go).
	ConfirmPhrase string
}

// machineHistoryLimit is how many audit events the machine page lists.
const machineHistoryLimit = 50

// MachineDetail reads the machine page of id (a machine_id, a host's BMC
// MAC address or a DPU serial); unknown is 404 not_found.
func (c *Console) MachineDetail(ctx context.Context, id string) (*MachineDetail, error) {
	m, err := c.a.GetMachine(ctx, id)
	if err != nil {
		return nil, err
	}
	d := &MachineDetail{Machine: *m, Bindings: map[string]allocator.Binding{}}
	host := m
	if m.Kind == allocator.KindDPU && m.HostMachineID != nil {
		if d.Host, err = c.a.GetMachine(ctx, *m.HostMachineID); err != nil {
			return nil, err
		}
		host = d.Host
	}
	if host.Kind == allocator.KindHost && host.ExpectedMachineID != nil {
		em, err := c.a.GetExpectedMachine(ctx, *host.ExpectedMachineID)
		if err != nil {
			if e, ok := fault.AsError(err); !ok || e.Code != fault.CodeNotFound {
				return nil, err
			}
		} else {
			d.ExpectedMachine = em
		}
	}
	// The members whose values and events the page shows: the machine and,
	// for a host, its DPUs.
	members := []allocator.Machine{*m}
	if m.Kind == allocator.KindHost {
		members = append(members, m.DPUs...)
	}
	names := map[string]string{}
	var ids []string
	for _, x := range members {
		ids = append(ids, x.MachineID)
		names[x.MachineID] = x.Name
	}
	d.ConfirmPhrase = allocator.ConfirmPhrase(host)
	err = c.read(ctx, func(db *gorm.DB) error {
		var dpuRows []models.Machine
		if err := db.Where("machine_id IN ? AND kind = ?", ids, allocator.KindDPU).Order("serial_number").Find(&dpuRows).Error; err != nil {
			return err
		}
		bs, err := allocator.BindingsOf(db, dpuRows)
		if err != nil {
			return err
		}
		for _, b := range bs {
			d.Bindings[b.MachineID] = b
		}
		if d.Values, err = c.heldValues(db, ids, names); err != nil {
			return err
		}
		d.History, err = machineHistory(db, ids, d.ExpectedMachine, d.Values)
		return err
	})
	if err != nil {
		return nil, err
	}
	// A DPU's ExpectedMachine is the one that declares its serial when its
	// host has none (a DPU discovered without a host, or misplaced).
	if b, ok := d.Bindings[m.MachineID]; ok && d.ExpectedMachine == nil && b.ExpectedMachineID != nil {
		if em, err := c.a.GetExpectedMachine(ctx, *b.ExpectedMachineID); err == nil {
			d.ExpectedMachine = em
		}
	}
	return d, nil
}

// heldValues lists the allocations owned by the machines ids and the
// values quarantined from them, in pool and value order.
func (c *Console) heldValues(db *gorm.DB, ids []string, names map[string]string) ([]HeldValue, error) {
	type row struct {
		models.Allocation
		PoolName string
	}
	var rows []row
	q := db.Raw(`SELECT a.*, p.name AS pool_name FROM allocations a JOIN pools p ON p.id = a.pool_id
		WHERE (a.owner_type = ? AND a.owner_id IN ?) OR (a.former_owner_type = ? AND a.former_owner_id IN ?)
		ORDER BY p.name, a.value_key`, allocator.OwnerTypeMachine, ids, allocator.OwnerTypeMachine, ids)
	if err := q.Scan(&rows).Error; err != nil {
		return nil, err
	}
	out := []HeldValue{}
	for _, r := range rows {
		if r.State == models.StateQuarantined && c.a.QuarantineLapsed(r.QuarantinedAt) {
			continue
		}
		owner := deref(r.OwnerID)
		if owner == "" {
			owner = deref(r.FormerOwnerID)
		}
		out = append(out, HeldValue{Pool: r.PoolName, Value: r.Value, State: r.State, OwnerID: owner, OwnerName: names[owner],
			AllocatedAt: r.AllocatedAt.UTC(), QuarantinedAt: r.QuarantinedAt, Reason: deref(r.QuarantineReason)})
	}
	return out, nil
}

// newMachineScope is what a machine's audit history covers: the machines
// (the host or DPU and, for a host, its DPUs), the ExpectedMachine and the
// values they hold or held. The machine page's History and the audit log
// filtered by machine read the same scope, so they list the same events.
func newMachineScope(ids []string, em *allocator.ExpectedMachine, values []HeldValue) audit.EventScope {
	s := audit.EventScope{Machines: ids}
	if em != nil {
		s.Expected = em.ID
	}
	for _, v := range values {
		s.Values = append(s.Values, v.Pool+"/"+v.Value)
	}
	return s
}

// MachineEventScope resolves the audit scope of the machine id as the
// machine page's History reads it (for audit.EventFilter.Scope). A
// machine that no longer exists (force deleted) is its own events only:
// what is known of it.
func (c *Console) MachineEventScope(ctx context.Context, id string) (*audit.EventScope, error) {
	d, err := c.MachineDetail(ctx, id)
	if err != nil {
		if e, ok := fault.AsError(err); ok && e.Code == fault.CodeNotFound {
			return &audit.EventScope{Machines: []string{id}}, nil
		}
		return nil, err
	}
	ids := []string{d.Machine.MachineID}
	if d.Machine.Kind == allocator.KindHost {
		for _, x := range d.Machine.DPUs {
			ids = append(ids, x.MachineID)
		}
	}
	s := newMachineScope(ids, d.ExpectedMachine, d.Values)
	return &s, nil
}

// machineHistory is the newest audit events of the machines, their
// ExpectedMachine and the values they hold.
func machineHistory(db *gorm.DB, ids []string, em *allocator.ExpectedMachine, values []HeldValue) ([]audit.Event, error) {
	var rows []models.AuditEvent
	q := db.Model(&models.AuditEvent{}).Where(newMachineScope(ids, em, values).Where(db))
	if err := q.Order("id DESC").Limit(machineHistoryLimit).Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make([]audit.Event, 0, len(rows))
	for i := range rows {
		out = append(out, audit.EventOut(&rows[i]))
	}
	return out, nil
}
