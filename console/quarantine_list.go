package console

import (
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/models"

	"github.com/ipledger/ipledger/allocator"
)

// QuarantinedValue is one quarantined value of the quarantine list: its
// pool, the host or DPU it came from by the name that machine had, when
// and by whom it was quarantined, and when it frees itself.
type QuarantinedValue struct {
	Pool, Value   string
	FormerOwnerID string
	// FormerOwner names the former owner as operators knew it (a DPU's
	// serial, a host's name), "type/id" for an owner that is no machine.
	FormerOwner   string
	QuarantinedAt time.Time
	By            string
	Reason        string
	// FreesAt is when the hold runs out; nil: held until an admin
	// unquarantines it or its former owner takes it back.
	FreesAt *time.Time
}

// quarantineListLimit bounds the list (oldest first, so what has waited
// longest is on top).
const quarantineListLimit = 1000

// QuarantinedValues lists every quarantined value of every pool, oldest
// first, at most limit (≤ 1000) of them.
func (c *Console) QuarantinedValues(ctx context.Context, limit int) ([]QuarantinedValue, error) {
	return c.quarantinedValues(ctx, limit, "")
}

// QuarantinedFromHost lists the values still quarantined from the deleted
// host hostID and from its deleted DPUs (deleted_machines), oldest first.
func (c *Console) QuarantinedFromHost(ctx context.Context, hostID string) ([]QuarantinedValue, error) {
	return c.quarantinedValues(ctx, quarantineListLimit, hostID)
}

// quarantinedValues is the quarantine list, of every pool or (hostID set)
// of the values whose former owner is that host or one of its deleted
// DPUs.
func (c *Console) quarantinedValues(ctx context.Context, limit int, hostID string) ([]QuarantinedValue, error) {
	if limit <= 0 || limit > quarantineListLimit {
		limit = quarantineListLimit
	}
	out := []QuarantinedValue{}
	err := c.read(ctx, func(db *gorm.DB) error {
		type row struct {
			models.Allocation
			PoolName string
		}
		var rows []row
		q := db.Table("allocations a").Select("a.*, p.name AS pool_name").Joins("JOIN pools p ON p.id = a.pool_id").
			Where("a.state = ?", models.StateQuarantined)
		if hostID != "" {
			owners := db.Model(&models.DeletedMachine{}).Select("machine_id").
				Where("machine_id = ? OR host_machine_id = ?", hostID, hostID)
			q = q.Where("a.former_owner_type = ? AND a.former_owner_id IN (?)", allocator.OwnerTypeMachine, owners)
		}
		if cut, ok := c.a.QuarantineCutoff(); ok {
			q = q.Where("a.quarantined_at > ?", cut)
		}
		if err := q.Order("a.quarantined_at, p.name, a.value_key").Limit(limit).Scan(&rows).Error; err != nil {
			return err
		}
		var ids, objs []string
		for _, r := range rows {
			if deref(r.FormerOwnerType) == allocator.OwnerTypeMachine {
				ids = append(ids, deref(r.FormerOwnerID))
			}
			objs = append(objs, r.PoolName+"/"+r.Value)
		}
		names, kinds, err := allocator.MachineNamesOf(db, ids)
		if err != nil {
			return err
		}
		// Who quarantined each value: the actor of its newest quarantine
		// event (an index probe of audit_events (object_type, object_id)).
		by := map[string]string{}
		for start := 0; start < len(objs); start += 500 {
			var evs []models.AuditEvent
			if err := db.Where("object_type = 'allocation' AND action = 'allocation.quarantine' AND object_id IN ?", objs[start:min(start+500, len(objs))]).
				Order("id").Find(&evs).Error; err != nil {
				return err
			}
			for _, e := range evs {
				by[e.ObjectID] = e.Actor
			}
		}
		for _, r := range rows {
			v := QuarantinedValue{Pool: r.PoolName, Value: r.Value, FormerOwnerID: deref(r.FormerOwnerID),
				Reason: deref(r.QuarantineReason), By: by[r.PoolName+"/"+r.Value]}
			if r.QuarantinedAt != nil {
				v.QuarantinedAt = r.QuarantinedAt.UTC()
				if hold := c.a.QuarantineHold(); hold > 0 {
					f := v.QuarantinedAt.Add(hold)
					v.FreesAt = &f
				}
			}
			v.FormerOwner = deref(r.FormerOwnerType) + "/" + v.FormerOwnerID
			if n := names[v.FormerOwnerID]; n != "" && deref(r.FormerOwnerType) == allocator.OwnerTypeMachine {
				v.FormerOwner = "host " + n
				if kinds[v.FormerOwnerID] == allocator.KindDPU {
					v.FormerOwner = "DPU " + n
				}
			}
			out = append(out, v)
		}
		return nil
	})
	return out, err
}
