package allocator

import (
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/ipledger/ipledger/models"
)

// plainWrites is every row a report batch's plain reports write.
type plainWrites struct {
	allocations []models.Allocation
	// prevPools[i], prevKeys[i]: a stored value whose run ends where a new
	// allocation begins (its run-end flag clears; a no-op where free).
	prevPools []int64
	prevKeys  []string
	machines  []models.Machine // hosts before their DPUs
	ncs       []models.NetworkConfig
	events    []models.AuditEvent
}

// flushPlain stores w: the allocations, the run ends they close, the
// machines, their network configs and the audit events, in that order.
// On PostgreSQL, on the transaction's own connection, the five statements
// go in one pipeline (one round trip); elsewhere one after the other. The
// events follow any the transaction recorded before, and are named by
// one look-up with the new machines taken as they will be stored
// (audit_names.go).
func (t *tx) flushPlain(w *plainWrites) error {
	if err := t.flushEvents(); err != nil {
		return err
	}
	if err := nameEvents(t.DB, w.events, w.machines); err != nil {
		return err
	}
	if t.conn != nil && t.a.dialect == models.Postgres {
		return t.flushPlainPG(w)
	}
	if len(w.allocations) > 0 {
		if err := t.Create(&w.allocations).Error; err != nil {
			return err
		}
	}
	if len(w.prevKeys) > 0 {
		conds := make([]string, len(w.prevKeys))
		args := []any{false}
		for i := range w.prevKeys {
			conds[i] = "(pool_id = ? AND value_key = ?)"
			args = append(args, w.prevPools[i], w.prevKeys[i])
		}
		if err := t.Exec(`UPDATE allocations SET run_end = ? WHERE run_end AND (`+strings.Join(conds, " OR ")+`)`, args...).Error; err != nil {
			return err
		}
	}
	for _, rows := range []any{&w.machines, &w.ncs, &w.events} {
		if err := createAll(t, rows); err != nil {
			return err
		}
	}
	return nil
}

// The pipeline's statements take one array per column, so that their text
// does not depend on the batch's size.
const (
	pgPlainInsertAllocations = `INSERT INTO allocations (pool_id, value_key, value, state, owner_type, owner_id, run_end, allocated_at)
		SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::boolean[], $8::timestamptz[])`
	pgPlainClearRunEnds = `UPDATE allocations a SET run_end = false FROM unnest($1::bigint[], $2::text[]) AS p(pool_id, value_key)
		WHERE a.pool_id = p.pool_id AND a.value_key = p.value_key AND a.run_end`
	pgPlainInsertMachines = `INSERT INTO machines (machine_id, kind, host_machine_id, state, bmc_mac_address, chassis_serial_number,
		serial_number, expected_machine_id, version, created_at, updated_at)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
		$9::bigint[], $10::timestamptz[], $11::timestamptz[])`
	pgPlainInsertNCs = `INSERT INTO network_configs (machine_id, loopback_ip, loopback_ip_v6, version, updated_at)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::timestamptz[])`
	pgPlainInsertEvents = `INSERT INTO audit_events (at, actor, action, object_type, object_id, request_id, before_json, after_json, actor_role, names_json)
		SELECT * FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[])`
)

func (t *tx) flushPlainPG(w *plainWrites) error {
	b := &pgx.Batch{}
	want := []int{}
	if n := len(w.allocations); n > 0 {
		pool, key, val, state, ot, oi := make([]int64, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		runEnd, at := make([]bool, n), make([]time.Time, n)
		for i, r := range w.allocations {
			pool[i], key[i], val[i], state[i], ot[i], oi[i], runEnd[i], at[i] = r.PoolID, r.ValueKey, r.Value, r.State, deref(r.OwnerType), deref(r.OwnerID), r.RunEnd, r.AllocatedAt
		}
		b.Queue(pgPlainInsertAllocations, pool, key, val, state, ot, oi, runEnd, at)
		want = append(want, n)
	}
	if len(w.prevKeys) > 0 {
		b.Queue(pgPlainClearRunEnds, w.prevPools, w.prevKeys)
		want = append(want, -1)
	}
	if n := len(w.machines); n > 0 {
		id, kind, host, state, mac, chassis, serial, em := make([]string, n), make([]string, n), make([]*string, n), make([]string, n),
			make([]*string, n), make([]string, n), make([]*string, n), make([]*string, n)
		ver, created, updated := make([]int64, n), make([]time.Time, n), make([]time.Time, n)
		for i, m := range w.machines {
			id[i], kind[i], host[i], state[i], mac[i], chassis[i], serial[i], em[i] = m.MachineID, m.Kind, m.HostMachineID, m.State,
				m.BmcMacAddress, m.ChassisSerialNumber, m.SerialNumber, m.ExpectedMachineID
			ver[i], created[i], updated[i] = m.Version, m.CreatedAt, m.UpdatedAt
		}
		b.Queue(pgPlainInsertMachines, id, kind, host, state, mac, chassis, serial, em, ver, created, updated)
		want = append(want, n)
	}
	if n := len(w.ncs); n > 0 {
		id, v4, v6, ver, at := make([]string, n), make([]*string, n), make([]*string, n), make([]int64, n), make([]time.Time, n)
		for i, nc := range w.ncs {
			id[i], v4[i], v6[i], ver[i], at[i] = nc.MachineID, nc.LoopbackIP, nc.LoopbackIPv6, nc.Version, nc.UpdatedAt
		}
		b.Queue(pgPlainInsertNCs, id, v4, v6, ver, at)
		want = append(want, n)
	}
	if n := len(w.events); n > 0 {
		at, actor, action, ot, oid, rid, before, after := make([]time.Time, n), make([]string, n), make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]*string, n), make([]*string, n)
		role, names := make([]*string, n), make([]*string, n)
		for i, e := range w.events {
			role[i], names[i] = e.ActorRole, e.NamesJSON
			at[i], actor[i], action[i], ot[i], oid[i], rid[i], before[i], after[i] = e.At, e.Actor, e.Action, e.ObjectType, e.ObjectID, e.RequestID, e.BeforeJSON, e.AfterJSON
		}
		b.Queue(pgPlainInsertEvents, at, actor, action, ot, oid, rid, before, after, role, names)
		want = append(want, n)
	}
	if len(want) == 0 {
		return nil
	}
	return t.conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("report batch: the connection is not a pgx connection")
		}
		br := sc.Conn().SendBatch(t.ctx, b)
		for _, n := range want {
			tag, err := br.Exec()
			if err != nil {
				br.Close()
				return err
			}
			if n >= 0 && tag.RowsAffected() != int64(n) {
				br.Close()
				return fmt.Errorf("report batch: %q stored %d of %d rows", tag.String(), tag.RowsAffected(), n)
			}
		}
		return br.Close()
	})
}

// createAll inserts a slice of rows in one statement (nothing when empty).
func createAll(t *tx, rows any) error {
	n := 0
	switch r := rows.(type) {
	case *[]models.Machine:
		n = len(*r)
	case *[]models.NetworkConfig:
		n = len(*r)
	case *[]models.AuditEvent:
		n = len(*r)
	}
	if n == 0 {
		return nil
	}
	return t.Create(rows).Error
}
