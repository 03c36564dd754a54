package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
)

// reconcileAtStartup completes DPUs missing a loopback (e.g. lo-ip-v6 was
// defined in the pool file after they were ingested, or a pool grew while
// the server was down), then keeps doing so every interval
// (IPLEDGER_RECONCILE_INTERVAL; 0 turns it off) while the server runs, so a conflict an operator resolves (a blocking value
// released, the ExpectedMachines fixed) is completed without waiting for
// the next report.
func reconcileAtStartup(ctx context.Context, a *allocator.Allocator, log *slog.Logger, interval time.Duration) error {
	rctx := audit.WithActor(ctx, "system:reconcile", "")
	res, err := a.ReconcileLoopbacks(rctx)
	if err != nil {
		return fmt.Errorf("loopback reconciliation: %w", err)
	}
	log.Info("loopback reconciliation", "dpus_missing_a_loopback", res.Checked, "completed", res.Completed, "still_incomplete", len(res.Incomplete))
	for _, i := range res.Incomplete {
		log.Warn("DPU loopback still unassigned", "machine_id", i.MachineID, "family", i.Family, "code", i.Code, "message", i.Message)
	}
	if interval > 0 {
		go func() {
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				res, err := a.ReconcileLoopbacks(rctx)
				switch {
				case err != nil && ctx.Err() == nil:
					log.Warn("periodic loopback reconciliation failed", "error", err)
				case err == nil && res.Completed > 0:
					log.Info("periodic loopback reconciliation", "completed", res.Completed, "still_incomplete", len(res.Incomplete))
				}
			}
		}()
	}
	return nil
}
