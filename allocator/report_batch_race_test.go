package allocator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/txn"
)

// Two server processes (two allocators over one database) take reports
// racing for the same hosts and serials, while ExpectedMachines change
// their reservations and hosts are force deleted or decommissioned and
// deleted. Whatever the interleaving: a ready DPU's network config names
// exactly the values it holds, a declared value is held only by (or
// quarantined for) the DPU that declares it, run ends and range counts are
// exact; and once every host has been reported again, reporting them all
// once more changes nothing (no audit event, no version).
func TestReportBatchesRaceAcrossProcesses(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFnd(t, db, 0)
		f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.0.0.1", "10.0.0.12", true), rng("10.0.0.13", "10.0.0.24", false))
		f.mkPool(PoolLoopbackV6, "ipv6", 0, rng("fd00::1", "fd00::ff", true), rng("fd00::100", "fd00::10f", false))
		procs := []*Allocator{f.a, New(db, Options{Now: f.clock.Now})}
		mac := func(h int) string { return fmt.Sprintf("02:00:00:00:0c:%02x", h) }
		const hosts, serials = 6, 10
		for h := 0; h < 3; h++ {
			f.emWith(mac(h), "[]")
		}
		var wg sync.WaitGroup
		for g := 0; g < 6; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				a := procs[g%2]
				rnd := rand.New(rand.NewPCG(uint64(g), 11))
				ctx := audit.WithActor(context.Background(), fmt.Sprintf("g%d", g), "")
				for step := 0; step < 40; step++ {
					h := rnd.IntN(hosts)
					switch k := rnd.IntN(10); {
					case k < 6:
						spec := ReportSpec{BmcMacAddress: mac(h)}
						for _, s := range rnd.Perm(serials)[:rnd.IntN(3)] {
							spec.DPUs = append(spec.DPUs, ReportDPU{SerialNumber: fmt.Sprintf("S%d", s)})
						}
						if _, err := a.Report(ctx, spec); err != nil {
							if e, ok := fault.AsError(err); !ok || e.Code != fault.CodeConflict {
								t.Errorf("report %+v: %v", spec, err)
							}
						}
					case k < 8 && h < 3:
						var dpus []ExpectedDPU
						for i, s := range rnd.Perm(serials)[:rnd.IntN(3)] {
							d := ExpectedDPU{SerialNumber: fmt.Sprintf("S%d", s)}
							if rnd.IntN(2) == 0 {
								d.LoopbackIP = strp(fmt.Sprintf("10.0.0.%d", 13+rnd.IntN(12)))
							}
							if i == 0 && rnd.IntN(2) == 0 {
								d.LoopbackIPv6 = strp(fmt.Sprintf("fd00::%x", 0x100+rnd.IntN(16)))
							}
							dpus = append(dpus, d)
						}
						_, _ = a.ReplaceExpectedMachine(ctx, mac(h), ExpectedMachineSpec{BmcMacAddress: mac(h),
							ChassisSerialNumber: "CHS-" + mac(h), FallbackDPUSerialNumbers: []string{}, ExpectedDPUs: &dpus}, txn.IfMatch{})
					case k < 9:
						_, _ = a.DeleteMachine(ctx, HostMachineID(mac(h)), true)
					default:
						if _, err := a.Decommission(ctx, HostMachineID(mac(h))); err == nil {
							_, _ = a.DeleteMachine(ctx, HostMachineID(mac(h)), false)
						}
					}
				}
			}(g)
		}
		wg.Wait()
		checkLoopbackInvariants(t, db)
		f.checkRunEnds(PoolLoopbackV4)
		f.checkRunEnds(PoolLoopbackV6)
		f.checkRangeCounts(PoolLoopbackV4)
		f.checkRangeCounts(PoolLoopbackV6)

		// Report every ready host with its DPUs twice, as batches.
		var hs []models.Machine
		if err := db.Where("kind = ? AND state = ?", KindHost, StateReady).Order("machine_id").Find(&hs).Error; err != nil {
			t.Fatal(err)
		}
		var specs []ReportSpec
		for _, h := range hs {
			spec := ReportSpec{BmcMacAddress: deref(h.BmcMacAddress)}
			var ds []models.Machine
			db.Where("host_machine_id = ? AND state = ?", h.MachineID, StateReady).Find(&ds)
			for _, d := range ds {
				spec.DPUs = append(spec.DPUs, ReportDPU{SerialNumber: deref(d.SerialNumber)})
			}
			specs = append(specs, spec)
		}
		for round := 0; round < 2; round++ {
			before := f.countRows(&models.AuditEvent{}, "1 = 1")
			vers := machineVersions(t, db)
			reportsQueued(t, procs[round], len(specs), func(i int) {
				if _, err := procs[round].Report(f.ctx, specs[i]); err != nil {
					t.Errorf("report %+v: %v", specs[i], err)
				}
			})
			if round == 1 {
				if n := f.countRows(&models.AuditEvent{}, "1 = 1"); n != before {
					t.Fatalf("repeating the reports wrote %d audit events", n-before)
				}
				if got := machineVersions(t, db); got != vers {
					t.Fatalf("repeating the reports changed versions:\n%s\n%s", vers, got)
				}
			}
		}
		checkLoopbackInvariants(t, db)
	})
}

func machineVersions(t *testing.T, db *gorm.DB) string {
	t.Helper()
	var ms []models.Machine
	var ncs []models.NetworkConfig
	db.Order("machine_id").Find(&ms)
	db.Order("machine_id").Find(&ncs)
	s := ""
	for _, m := range ms {
		s += fmt.Sprintf("%s:%d ", m.MachineID[:12], m.Version)
	}
	for _, n := range ncs {
		s += fmt.Sprintf("nc%s:%d ", n.MachineID[:12], n.Version)
	}
	return s
}

// checkLoopbackInvariants checks the rules every committed state keeps.
func checkLoopbackInvariants(t *testing.T, db *gorm.DB) {
	t.Helper()
	var pools []models.Pool
	db.Where("name IN ?", []string{PoolLoopbackV4, PoolLoopbackV6}).Find(&pools)
	poolOf := map[int64]string{}
	for _, p := range pools {
		poolOf[p.ID] = p.Name
	}
	var as []models.Allocation
	db.Where("pool_id IN ?", []int64{pools[0].ID, pools[1].ID}).Find(&as)
	held := map[string]string{} // pool/machine → value
	byValue := map[string]models.Allocation{}
	for _, a := range as {
		byValue[poolOf[a.PoolID]+"/"+a.Value] = a
		if a.State == models.StateAllocated && deref(a.OwnerType) == OwnerTypeMachine {
			k := poolOf[a.PoolID] + "/" + deref(a.OwnerID)
			if v, dup := held[k]; dup {
				t.Fatalf("%s holds %s and %s", k, v, a.Value)
			}
			held[k] = a.Value
		}
	}
	var dpus []models.Machine
	db.Where("kind = ? AND state = ?", KindDPU, StateReady).Find(&dpus)
	for _, d := range dpus {
		var nc models.NetworkConfig
		if err := db.Where("machine_id = ?", d.MachineID).Take(&nc).Error; err != nil {
			t.Fatalf("DPU %s has no network config: %v", deref(d.SerialNumber), err)
		}
		for _, f := range loopbackFamilies {
			if got, want := deref(f.active(&nc)), held[f.pool+"/"+d.MachineID]; got != want {
				t.Fatalf("DPU %s: network config %s %q, holds %q", deref(d.SerialNumber), f.column, got, want)
			}
		}
	}
	var decls []models.ExpectedDPU
	db.Find(&decls)
	for _, d := range decls {
		for _, f := range loopbackFamilies {
			v := f.reserved(&d)
			if v == nil {
				continue
			}
			a, ok := byValue[f.pool+"/"+*v]
			if !ok {
				continue
			}
			id := DPUMachineID(d.SerialNumber)
			if deref(a.OwnerID) != id && deref(a.FormerOwnerID) != id {
				t.Fatalf("%s is declared for %s but %s: owner %s, former owner %s", *v, d.SerialNumber, a.State, deref(a.OwnerID), deref(a.FormerOwnerID))
			}
		}
	}
}
