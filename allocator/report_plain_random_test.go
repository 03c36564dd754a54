package allocator

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// Random sites with history — reports, force deletes, decommissions,
// values held by others, reservations that are valid or not (in the
// automatic range, taken, outside every range), quarantines that expire —
// then a random batch: the batch must equal its reports one by one.
func TestReportPlainRandomEqualsOneByOne(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 16; seed++ {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			t.Parallel()
			mac := func(h int) string { return fmt.Sprintf("02:00:00:00:0d:%02x", h) }
			rnd := rand.New(rand.NewPCG(seed, 3))
			var reports []ReportSpec
			seen := map[string]bool{}
			randomSpec := func(r *rand.Rand) ReportSpec {
				spec := ReportSpec{BmcMacAddress: mac(r.IntN(8))}
				for _, s := range r.Perm(12)[:r.IntN(4)] {
					spec.DPUs = append(spec.DPUs, ReportDPU{SerialNumber: fmt.Sprintf("S%d", s)})
				}
				return spec
			}
			for len(reports) < 10 {
				s := randomSpec(rnd)
				if k := reportKey(t, s); !seen[k] {
					seen[k] = true
					reports = append(reports, s)
				}
			}
			plainEquivalent(t, plainCase{
				hold:    time.Hour,
				reports: reports,
				setup: func(f *fnd) {
					r := rand.New(rand.NewPCG(seed, 5))
					f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.0.0.1", "10.0.0.8", true), rng("10.0.0.9", "10.0.0.20", false))
					v6 := r.IntN(3) // 0: from the start, 1: created in the history, 2: never
					mkV6 := func() {
						f.mkPool(PoolLoopbackV6, "ipv6", 0, rng("fd00::1", "fd00::6", true), rng("fd00::7", "fd00::10", false))
					}
					if v6 == 0 {
						mkV6()
					}
					// Reservations: mostly in the reserved ranges, some in the
					// automatic one or outside every range.
					v4s, v6s := r.Perm(24), r.Perm(18)
					serials := r.Perm(12)
					for h := 0; h < 5; h++ {
						var dpus [][3]string
						for k := 0; k < 2; k++ {
							s := serials[2*h+k]
							d := [3]string{fmt.Sprintf("S%d", s), "", ""}
							if r.IntN(3) > 0 {
								d[1] = fmt.Sprintf("10.0.0.%d", 1+v4s[2*h+k])
							}
							if r.IntN(2) > 0 {
								d[2] = fmt.Sprintf("fd00::%x", 1+v6s[2*h+k])
							}
							dpus = append(dpus, d)
						}
						fallback := "[]"
						if r.IntN(3) == 0 {
							fallback = fmt.Sprintf(`["S%d"]`, serials[(2*h+5)%12])
						}
						f.emWith(mac(h), fallback, dpus...)
					}
					for step := 0; step < 12; step++ {
						if step == 6 && v6 == 1 {
							mkV6() // pool growth completes the DPUs
						}
						h := r.IntN(8)
						switch k := r.IntN(10); {
						case k < 5:
							_, _ = f.a.Report(f.ctx, randomSpec(r))
						case k < 6:
							_, _ = f.a.DeleteMachine(f.ctx, HostMachineID(mac(h)), true)
						case k < 7:
							if _, err := f.a.Decommission(f.ctx, HostMachineID(mac(h))); err == nil && r.IntN(2) == 0 {
								_, _ = f.a.DeleteMachine(f.ctx, HostMachineID(mac(h)), false)
							}
						case k < 8:
							_, _, _ = f.a.Allocate(f.ctx, PoolLoopbackV4, Owner{Type: "vm", ID: fmt.Sprintf("vm%d", step)}, fmt.Sprintf("10.0.0.%d", 9+r.IntN(12)))
						case k < 9:
							_, _ = f.a.Discover(f.ctx, DiscoverSpec{SerialNumber: fmt.Sprintf("S%d", r.IntN(12))})
						default:
							f.clock.Advance(time.Duration(r.IntN(90)) * time.Minute)
						}
					}
				},
			})
		})
	}
}
