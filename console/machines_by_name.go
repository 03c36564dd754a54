package console

import (
	"context"
	"encoding/base64"
	"strings"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/models"

	"github.com/ipledger/ipledger/allocator"
)

// The console lists hosts by the name it shows (names.go), not by
// machine_id: operators read rack positions, and a hash order scatters
// them (r01-u11, r02-u14, r01-u12…). The name is not a column: it is the
// ExpectedMachine's metadata.name, matched live by BMC MAC, else the
// chassis serial, else the BMC MAC. So the key is computed in the query
// and the pages are keyset-paginated on (key, machine_id): the machine_id
// breaks ties between equal names, and the cursor carries both, so a page
// never repeats or skips a host while names stay unchanged.
//
// The key is compared in lower case and in byte order on both databases
// (SQLite BINARY, PostgreSQL COLLATE "C"), so "rack7-u12" and "Rack7-u13"
// sort together and the order is the same on SQLite and PostgreSQL. No
// index holds this key (it spans two tables); the planner joins the
// ExpectedMachines through their LOWER(bmc_mac_address) index.
//
// DPUs without a host are not hosts: ListHostlessDPUs lists them apart.

// hostNameKey is the SQL of the sort key; m is machines, em the
// ExpectedMachine joined by BMC MAC.
const hostNameKey = `LOWER(COALESCE(NULLIF(TRIM(em.metadata_name), ''), NULLIF(TRIM(m.chassis_serial_number), ''), m.bmc_mac_address, m.machine_id))`

// hostEMJoin joins each host's ExpectedMachine by BMC MAC through the
// LOWER(bmc_mac_address) index. Both sides are LOWER(...): compared with
// the bare column, SQLite gives the comparison the column's TEXT affinity,
// which the expression index does not have, and scans every
// ExpectedMachine for every host (1.2 s for the first page at 1,000 hosts,
// 40 ms with the index). Machines store their MAC lower-case already.
const hostEMJoin = "LEFT JOIN expected_machines em ON LOWER(em.bmc_mac_address) = LOWER(m.bmc_mac_address)"

// ListHostsByName returns one page of managed hosts (never DPUs) with
// their DPUs, ordered by the name the console shows, then machine_id.
// f.Cursor is the NextCursor of the previous page; a cursor this function
// did not return is 422 invalid.
func (c *Console) ListHostsByName(ctx context.Context, f allocator.MachineFilter) (*allocator.MachinePage, error) {
	switch f.State {
	case "", allocator.StateReady, allocator.StateDecommissioned:
	default:
		return nil, allocator.Errf(allocator.CodeInvalid, "state", "unknown state %q: want ready or decommissioned", f.State)
	}
	var afterKey, afterID string
	if f.Cursor != "" {
		k, id, ok := decodeNameCursor(f.Cursor)
		if !ok {
			return nil, allocator.Errf(allocator.CodeInvalid, "cursor", "cursor %q is not one this list returned", f.Cursor)
		}
		afterKey, afterID = k, id
	}
	f.Limit = clampLimit(f.Limit)
	key := hostNameKey
	if c.a.Dialect() == models.Postgres {
		key += ` COLLATE "C"`
	}
	type row struct {
		models.Machine
		SortKey string
	}
	var rows []row
	err := c.read(ctx, func(db *gorm.DB) error {
		q := db.Table("machines AS m").
			Select("m.*, "+key+" AS sort_key").
			Joins(hostEMJoin).
			Where("m.kind = ? AND m.host_machine_id IS NULL", allocator.KindHost)
		if f.State != "" {
			q = q.Where("m.state = ?", f.State)
		}
		if f.Cursor != "" {
			q = q.Where("("+key+" > ? OR ("+key+" = ? AND m.machine_id > ?))", afterKey, afterKey, afterID)
		}
		return q.Order(key + ", m.machine_id").Limit(f.Limit + 1).Scan(&rows).Error
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
		return nil, false, allocator.Errf(allocator.CodeInvalid, "state", "unknown state %q: want ready or decommissioned", state)
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
