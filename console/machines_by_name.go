package console

import (
	"context"
	"encoding/base64"
	"strings"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"

	"github.com/ipledger/ipledger/allocator"
)

// The console lists hosts by the name it shows (allocator/names.go), not
// by machine_id: operators read rack positions, and a hash order scatters
// them (r01-u11, r02-u14, r01-u12…). The name is the ExpectedMachine's
// metadata.name matched by BMC MAC, else the chassis serial, else the BMC
// MAC; triggers keep it, in lower case, in machines.sort_name on every
// write of a machine or an ExpectedMachine (migration 23). The pages are
// keyset-paginated on the index (sort_name, machine_id): the machine_id
// breaks ties between equal names, and the cursor carries both, so a page
// never repeats or skips a host while names stay unchanged, and a deep
// page costs what the first one does.
//
// The key is compared in byte order on both databases (SQLite BINARY,
// PostgreSQL COLLATE "C" on the column), so "rack7-u12" and "Rack7-u13"
// sort together and the order is the same on SQLite and PostgreSQL.
//
// DPUs without a host are not hosts: ListHostlessDPUs lists them apart.

// ListHostsByName returns one page of managed hosts (never DPUs) with
// their DPUs, ordered by the name the console shows, then machine_id.
// f.Cursor is the NextCursor of the previous page; a cursor this function
// did not return is 422 invalid.
func (c *Console) ListHostsByName(ctx context.Context, f allocator.MachineFilter) (*allocator.MachinePage, error) {
	switch f.State {
	case "", allocator.StateReady, allocator.StateDecommissioned:
	default:
		return nil, fault.Errf(fault.CodeInvalid, "state", "unknown state %q: want ready or decommissioned", f.State)
	}
	var afterKey, afterID string
	if f.Cursor != "" {
		k, id, ok := decodeNameCursor(f.Cursor)
		if !ok {
			return nil, fault.Errf(fault.CodeInvalid, "cursor", "cursor %q is not one this list returned", f.Cursor)
		}
		afterKey, afterID = k, id
	}
	f.Limit = clampLimit(f.Limit)
	type row struct {
		models.Machine
		SortKey string
	}
	var rows []row
	err := c.read(ctx, func(db *gorm.DB) error {
		q := db.Table("machines AS m").
			Select("m.*, m.sort_name AS sort_key").
			Where("m.kind = ? AND m.host_machine_id IS NULL", allocator.KindHost)
		if f.State != "" {
			q = q.Where("m.state = ?", f.State)
		}
		if f.Cursor != "" {
			q = q.Where("(m.sort_name, m.machine_id) > (?, ?)", afterKey, afterID)
		}
		return q.Order("m.sort_name, m.machine_id").Limit(f.Limit + 1).Scan(&rows).Error
	})
	if err != nil {
		return nil, err
	}
	page := &allocator.MachinePage{Items: []allocator.Machine{}}
	if len(rows) > f.Limit {
		rows = rows[:f.Limit]
		last := rows[len(rows)-1]
		page.NextCursor = encodeNameCursor(last.SortKey, last.MachineID)
	}
	top := make([]models.Machine, len(rows))
	for i, r := range rows {
		top[i] = r.Machine
	}
	items, err := c.a.MachinesOf(ctx, c.db.WithContext(ctx), top)
	if err != nil {
		return nil, err
	}
	page.Items = items
	return page, nil
}

// ListHostlessDPUs returns DPUs discovered without a known host, by serial
// number, at most limit (clamped as every list) of them; more tells
// whether some were left off.
func (c *Console) ListHostlessDPUs(ctx context.Context, state string, limit int) (items []allocator.Machine, more bool, err error) {
	switch state {
	case "", allocator.StateReady, allocator.StateDecommissioned:
	default:
		return nil, false, fault.Errf(fault.CodeInvalid, "state", "unknown state %q: want ready or decommissioned", state)
	}
	limit = clampLimit(limit)
	var top []models.Machine
	err = c.read(ctx, func(db *gorm.DB) error {
		q := db.Where("kind = ? AND host_machine_id IS NULL", allocator.KindDPU)
		if state != "" {
			q = q.Where("state = ?", state)
		}
		return q.Order("serial_number").Limit(limit + 1).Find(&top).Error
	})
	if err != nil {
		return nil, false, err
	}
	if len(top) > limit {
		top, more = top[:limit], true
	}
	items, err = c.a.MachinesOf(ctx, c.db.WithContext(ctx), top)
	return items, more, err
}

// A name cursor is the last row's key and machine_id: base64url(key) "." id.
func encodeNameCursor(key, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(key)) + "." + id
}

func decodeNameCursor(c string) (key, id string, ok bool) {
	k, id, found := strings.Cut(c, ".")
	if !found || !allocator.IsMachineID(id) {
		return "", "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(k)
	if err != nil {
		return "", "", false
	}
	return string(b), id, true
}
