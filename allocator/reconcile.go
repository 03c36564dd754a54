package allocator

import (
	"context"
	"errors"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/models"
)

// ReconcileResult tells what a reconciliation did.
type ReconcileResult struct {
	// Checked is the number of ready DPUs that were missing a loopback.
	Checked int `json:"checked"`
	// Completed is the number of DPUs that got at least one value.
	Completed int `json:"completed"`
	// Incomplete lists what still could not be assigned.
	Incomplete []Incomplete `json:"incomplete"`
}

// ReconcileLoopbacks runs EnsureLoopbacks on every ready DPU missing a
// loopback of the given pools' families (lo-ip, lo-ip-v6; none given:
// both) — e.g. when lo-ip-v6 is defined after DPUs were ingested, a pool
// was exhausted and grew, or a reserved value became available again.
// It works in batches of 100 DPUs, one transaction each.
func (a *Allocator) ReconcileLoopbacks(ctx context.Context, pools ...string) (*ReconcileResult, error) {
	if len(pools) == 0 {
		pools = []string{PoolLoopbackV4, PoolLoopbackV6}
	}
	var conds []string
	for _, name := range pools {
		if f, ok := familyOfPool(name); ok {
			conds = append(conds, "nc."+f.column+" IS NULL")
		}
	}
	res := &ReconcileResult{Incomplete: []Incomplete{}}
	if len(conds) == 0 {
		return res, nil
	}
	var ids []string
	err := a.read(ctx, func(db *gorm.DB) error {
		return db.Raw(`SELECT m.machine_id FROM machines m LEFT JOIN network_configs nc ON nc.machine_id = m.machine_id
			WHERE m.kind = ? AND m.state = ? AND (nc.machine_id IS NULL OR `+strings.Join(conds, " OR ")+`)
			ORDER BY m.serial_number`, KindDPU, StateReady).Scan(&ids).Error
	})
	if err != nil {
		return nil, err
	}
	res.Checked = len(ids)
	for start := 0; start < len(ids); start += 100 {
		batch := ids[start:min(start+100, len(ids))]
		var completed int
		var inc []Incomplete
		err := a.write(ctx, func(t *tx) error {
			completed, inc = 0, nil
			locked, err := t.lockPools(PoolLoopbackV4, PoolLoopbackV6)
			if err != nil {
				return err
			}
			for _, id := range batch {
				var row models.Machine
				err := t.Where("machine_id = ? AND state = ?", id, StateReady).Take(&row).Error
				if errors.Is(err, gorm.ErrRecordNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				changed, problems, err := t.ensureLoopbacks(locked, &row)
				if err != nil {
					return err
				}
				if changed {
					completed++
				}
				inc = append(inc, problems...)
			}
			return nil
		})
		if err != nil {
			return res, err
		}
		res.Completed += completed
		res.Incomplete = append(res.Incomplete, inc...)
	}
	return res, nil
}

// afterGrowth runs after a pool gained values (a pool created, a range
// added or grown, a pool file loaded): if it is a loopback pool, DPUs that
// miss a loopback of its family are completed now.
func (a *Allocator) afterGrowth(ctx context.Context, pool string) {
	if _, ok := familyOfPool(pool); !ok {
		return
	}
	// Leave the request that grew the pool time to answer: whatever
	// does not fit is completed by the next (periodic or startup)
	// reconciliation.
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(context.WithoutCancel(ctx), dl.Add(-3*time.Second))
		defer cancel()
	}
	res, err := a.ReconcileLoopbacks(ctx, pool)
	if err != nil {
		a.log.Error("completing DPU loopbacks after pool growth failed", "pool", pool, "error", err)
		return
	}
	if res.Checked > 0 {
		a.log.Info("DPU loopbacks completed after pool growth", "pool", pool, "checked", res.Checked,
			"completed", res.Completed, "still_incomplete", len(res.Incomplete))
	}
}
