package allocator

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/ipledger/ipledger/models"
)

// plainReads is what a report batch reads before it decides anything
// (readPlainSite): one query per table.
type plainReads struct {
	ems      []models.ExpectedMachine
	machines []models.Machine
	decls    []models.ExpectedDPU
	ncs      []models.NetworkConfig
	owned    []models.Allocation // held by or quarantined for the DPUs, any pool
	ranges   []models.PoolRange
}

// readPlain runs the batch's reads. On PostgreSQL, on the transaction's own
// connection, they go in one pipeline (one round trip while lo-ip and
// lo-ip-v6 are locked, instead of six); SQLite is in-process and reads
// them one after the other.
//
// The machines read are those of machineIDs and those holding one of
// bmcMACs (another machine with a reported BMC MAC).
func (t *tx) readPlain(lowerMACs, machineIDs, bmcMACs, serials, dpuIDs []string, poolIDs []int64) (*plainReads, error) {
	if t.conn != nil && t.a.dialect == models.Postgres {
		return t.readPlainPG(lowerMACs, machineIDs, bmcMACs, serials, dpuIDs, poolIDs)
	}
	r := &plainReads{}
	if err := t.Where("LOWER(bmc_mac_address) IN ?", lowerMACs).Find(&r.ems).Error; err != nil {
		return nil, err
	}
	if err := t.Where("machine_id IN ? OR bmc_mac_address IN ?", machineIDs, bmcMACs).Find(&r.machines).Error; err != nil {
		return nil, err
	}
	if len(serials) == 0 {
		return r, nil
	}
	if err := t.Where("serial_number IN ?", serials).Find(&r.decls).Error; err != nil {
		return nil, err
	}
	if err := t.Where("machine_id IN ?", dpuIDs).Find(&r.ncs).Error; err != nil {
		return nil, err
	}
	if len(poolIDs) == 0 {
		return r, nil
	}
	// No condition on pool_id (see pgPlainOwned).
	if err := t.Where("(owner_type = ? AND owner_id IN ?) OR (former_owner_type = ? AND former_owner_id IN ?)",
		OwnerTypeMachine, dpuIDs, OwnerTypeMachine, dpuIDs).Find(&r.owned).Error; err != nil {
		return nil, err
	}
	if err := t.Where("pool_id IN ?", poolIDs).Find(&r.ranges).Error; err != nil {
		return nil, err
	}
	return r, nil
}

// The pipeline's queries name their columns (those the batch uses) and
// take arrays, so that their text does not depend on the batch's size.
const (
	pgPlainEMs      = `SELECT id, bmc_mac_address, chassis_serial_number FROM expected_machines WHERE lower(bmc_mac_address) = ANY($1)`
	pgPlainMachines = `SELECT machine_id, kind, host_machine_id, state, bmc_mac_address, chassis_serial_number, serial_number,
		expected_machine_id, version, created_at, updated_at FROM machines WHERE machine_id = ANY($1) OR bmc_mac_address = ANY($2)`
	pgPlainDecls = `SELECT expected_machine_id, serial_number, loopback_ip, loopback_ip_v6 FROM expected_dpus WHERE serial_number = ANY($1)`
	pgPlainNCs   = `SELECT machine_id, loopback_ip, loopback_ip_v6, version FROM network_configs WHERE machine_id = ANY($1)`
	// No condition on pool_id: with one, PostgreSQL's generic plan reads
	// every row of the pools through the (pool_id, owner_type, owner_id)
	// index, a cost that grows with the site; the owner indexes answer
	// this one.
	pgPlainOwned = `SELECT pool_id, value, state, owner_type, owner_id, former_owner_type, former_owner_id FROM allocations
		WHERE (owner_type = 'machine' AND owner_id = ANY($1)) OR (former_owner_type = 'machine' AND former_owner_id = ANY($1))`
	pgPlainRanges = `SELECT pool_id, first_key, last_key, auto_assign FROM pool_ranges WHERE pool_id = ANY($1)`
)

func (t *tx) readPlainPG(lowerMACs, machineIDs, bmcMACs, serials, dpuIDs []string, poolIDs []int64) (*plainReads, error) {
	r := &plainReads{}
	err := t.conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("report batch: the connection is not a pgx connection")
		}
		b := &pgx.Batch{}
		b.Queue(pgPlainEMs, lowerMACs).Query(func(rows pgx.Rows) error {
			return scanEach(rows, func() error {
				var em models.ExpectedMachine
				if err := rows.Scan(&em.ID, &em.BmcMacAddress, &em.ChassisSerialNumber); err != nil {
					return err
				}
				r.ems = append(r.ems, em)
				return nil
			})
		})
		b.Queue(pgPlainMachines, machineIDs, bmcMACs).Query(func(rows pgx.Rows) error {
			return scanEach(rows, func() error {
				var m models.Machine
				if err := rows.Scan(&m.MachineID, &m.Kind, &m.HostMachineID, &m.State, &m.BmcMacAddress, &m.ChassisSerialNumber,
					&m.SerialNumber, &m.ExpectedMachineID, &m.Version, &m.CreatedAt, &m.UpdatedAt); err != nil {
					return err
				}
				r.machines = append(r.machines, m)
				return nil
			})
		})
		if len(serials) > 0 {
			b.Queue(pgPlainDecls, serials).Query(func(rows pgx.Rows) error {
				return scanEach(rows, func() error {
					var d models.ExpectedDPU
					if err := rows.Scan(&d.ExpectedMachineID, &d.SerialNumber, &d.LoopbackIP, &d.LoopbackIPv6); err != nil {
						return err
					}
					r.decls = append(r.decls, d)
					return nil
				})
			})
			b.Queue(pgPlainNCs, dpuIDs).Query(func(rows pgx.Rows) error {
				return scanEach(rows, func() error {
					var nc models.NetworkConfig
					if err := rows.Scan(&nc.MachineID, &nc.LoopbackIP, &nc.LoopbackIPv6, &nc.Version); err != nil {
						return err
					}
					r.ncs = append(r.ncs, nc)
					return nil
				})
			})
			if len(poolIDs) > 0 {
				b.Queue(pgPlainOwned, dpuIDs).Query(func(rows pgx.Rows) error {
					return scanEach(rows, func() error {
						var a models.Allocation
						if err := rows.Scan(&a.PoolID, &a.Value, &a.State, &a.OwnerType, &a.OwnerID, &a.FormerOwnerType, &a.FormerOwnerID); err != nil {
							return err
						}
						r.owned = append(r.owned, a)
						return nil
					})
				})
				b.Queue(pgPlainRanges, poolIDs).Query(func(rows pgx.Rows) error {
					return scanEach(rows, func() error {
						var pr models.PoolRange
						if err := rows.Scan(&pr.PoolID, &pr.FirstKey, &pr.LastKey, &pr.AutoAssign); err != nil {
							return err
						}
						r.ranges = append(r.ranges, pr)
						return nil
					})
				})
			}
		}
		return sc.Conn().SendBatch(t.ctx, b).Close()
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// scanEach calls fn for every row of rows.
func scanEach(rows pgx.Rows, fn func() error) error {
	for rows.Next() {
		if err := fn(); err != nil {
			return err
		}
	}
	return rows.Err()
}

// storedValues tells which of the values (pools[i], keys[i]) are stored
// (held or quarantined), by pool id and value key. On PostgreSQL the pairs
// go as two arrays joined to the (pool_id, value_key) index: a list of
// (pool_id = ? AND value_key IN …) conditions let the generic plan read
// every row of the pools instead.
func (t *tx) storedValues(pools []int64, keys []string) (map[int64]map[string]bool, error) {
	out := map[int64]map[string]bool{}
	if len(keys) == 0 {
		return out, nil
	}
	add := func(pool int64, key string) {
		if out[pool] == nil {
			out[pool] = map[string]bool{}
		}
		out[pool][key] = true
	}
	if t.conn != nil && t.a.dialect == models.Postgres {
		err := t.conn.Raw(func(dc any) error {
			sc, ok := dc.(*stdlib.Conn)
			if !ok {
				return fmt.Errorf("report batch: the connection is not a pgx connection")
			}
			rows, err := sc.Conn().Query(t.ctx, `SELECT a.pool_id, a.value_key FROM unnest($1::bigint[], $2::text[]) AS k(pool_id, value_key)
				JOIN allocations a ON a.pool_id = k.pool_id AND a.value_key = k.value_key`, pools, keys)
			if err != nil {
				return err
			}
			defer rows.Close()
			return scanEach(rows, func() error {
				var pool int64
				var key string
				if err := rows.Scan(&pool, &key); err != nil {
					return err
				}
				add(pool, key)
				return nil
			})
		})
		return out, err
	}
	conds := make([]string, len(keys))
	args := make([]any, 0, 2*len(keys))
	for i := range keys {
		conds[i] = "(pool_id = ? AND value_key = ?)"
		args = append(args, pools[i], keys[i])
	}
	var stored []models.Allocation
	if err := t.Select("pool_id", "value_key").Where(strings.Join(conds, " OR "), args...).Find(&stored).Error; err != nil {
		return nil, err
	}
	for _, r := range stored {
		add(r.PoolID, r.ValueKey)
	}
	return out, nil
}
