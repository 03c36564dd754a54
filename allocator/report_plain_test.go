package allocator

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/internal/testkit"
	"github.com/ipledger/ipledger/models"
)

// The set-based path of a report batch (report_plain.go) must leave exactly
// what running the same reports one by one through ingestReport leaves,
// in the order the batch ran them (its plain reports in arrival order,
// then the others): the same answers, machine rows, network configs,
// allocations with their run ends, and audit events in the same order
// with the same actors. Each seed builds a site with history — reported
// hosts, a decommissioned one, a force-deleted one whose values are
// quarantined, a reservation held by someone else, a host-less DPU — and
// sends a shuffled batch mixing new hosts (reserved, automatic, past the
// end of the automatic range), repeats, moved DPUs, misplaced ones,
// changed chassis serials and names repeated inside the batch.
func TestReportPlainEqualsOneByOne(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			t.Parallel()
			dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
				db2 := dbtest.Open(t, models.DialectOf(db))
				batch := plainScenario(t, db, seed)
				alone := plainScenario(t, db2, seed)

				results := make([]*IngestResult, len(batch.reports))
				errs := make([]error, len(batch.reports))
				var order []int
				index := map[string]int{}
				for i, r := range batch.reports {
					index[reportKey(t, r)] = i
				}
				plain := 0
				batch.a.reportOrder = func(ran []*report, n int) {
					order, plain = order[:0], n
					for _, r := range ran {
						order = append(order, index[r.mac+" "+strings.Join(r.serials, " ")])
					}
				}
				reportsQueued(t, batch.a, len(batch.reports), func(i int) {
					results[i], errs[i] = batch.a.Report(batch.actor(i), batch.reports[i])
				})
				batch.a.reportOrder = nil
				if len(order) != len(batch.reports) {
					t.Fatalf("the batch ran %d of %d reports (order %v)", len(order), len(batch.reports), order)
				}
				// The history above leaves about two thirds of the batch plain.
				if plain < len(order)/2 || plain == len(order) {
					t.Fatalf("the set-based path took %d of %d reports; the scenario should give it most, not all", plain, len(order))
				}

				for _, i := range order {
					r, err := newReport(alone.reports[i])
					if err != nil {
						t.Fatal(err)
					}
					res, err := alone.a.reportAlone(alone.actor(i), r)
					if fmt.Sprint(err) != fmt.Sprint(errs[i]) {
						t.Fatalf("report %d: batch error %v, alone %v", i, errs[i], err)
					}
					if got, want := jsonOf(t, results[i]), jsonOf(t, res); got != want {
						t.Fatalf("report %d answers differ:\nbatch %s\nalone %s", i, got, want)
					}
				}
				sameIngestState(t, db, db2)
			})
		})
	}
}

type plainSiteFixture struct {
	a       *Allocator
	reports []ReportSpec
}

func (s *plainSiteFixture) actor(i int) context.Context {
	return audit.WithActor(context.Background(), fmt.Sprintf("client-%d", i%3), fmt.Sprintf("req-%d", i))
}

func plainMAC(i int) string { return fmt.Sprintf("02:00:00:00:01:%02x", i) }

// plainScenario builds the seed's site on db and returns its batch.
func plainScenario(t *testing.T, db *gorm.DB, seed uint64) *plainSiteFixture {
	t.Helper()
	rnd := rand.New(rand.NewPCG(seed, 7))
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	a := New(db, Options{Now: clock.Now})
	ctx := audit.WithActor(context.Background(), "setup", "req-setup")
	f := &fnd{t: t, db: db, a: a, ctx: ctx, clock: clock}
	// The reserved range follows the automatic one, so run ends cross them.
	f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.0.0.1", "10.0.0.30", true), rng("10.0.0.31", "10.0.0.99", false))
	f.mkPool(PoolLoopbackV6, "ipv6", 0, rng("fd00::1", "fd00::ff", true), rng("fd00::100", "fd00::1ff", false))

	// A value somebody holds, later declared for a DPU of the batch.
	if _, _, err := a.Allocate(ctx, PoolLoopbackV4, Owner{Type: "vm", ID: "squatter"}, "10.0.0.99"); err != nil {
		t.Fatal(err)
	}
	// Hosts 0..39, two DPUs each (serial S<host>-<k>); about half have an
	// ExpectedMachine, whose DPUs have both, one or no loopback reserved.
	nextV4, nextV6 := 31, 0x100
	for h := 0; h < 40; h++ {
		if rnd.IntN(2) == 0 && h != 11 && h != 21 && h != 30 {
			continue
		}
		em := models.ExpectedMachine{ID: fmt.Sprintf("em-%02d", h), BmcMacAddress: plainMAC(h), ChassisSerialNumber: fmt.Sprintf("CHS-%02d", h),
			FallbackDPUSerialNumbers: "[]", MetadataLabels: "[]", Version: 1, CreatedAt: clock.Now(), UpdatedAt: clock.Now()}
		if err := db.Create(&em).Error; err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 2; k++ {
			d := models.ExpectedDPU{ExpectedMachineID: em.ID, Position: k, SerialNumber: fmt.Sprintf("S%02d-%d", h, k)}
			if h == 30 && k == 0 {
				d.SerialNumber = "S11-9" // reported under host 11: misplaced
			}
			if d.SerialNumber == "S21-0" {
				d.LoopbackIP, d.LoopbackIPKey = strp("10.0.0.99"), lcKey("10.0.0.99")
				if err := db.Create(&d).Error; err != nil {
					t.Fatal(err)
				}
				continue
			}
			switch rnd.IntN(4) {
			case 0, 1:
				v4 := fmt.Sprintf("10.0.0.%d", nextV4)
				v6 := fmt.Sprintf("fd00::%x", nextV6)
				nextV4++
				nextV6++
				d.LoopbackIP, d.LoopbackIPKey = strp(v4), lcKey(v4)
				d.LoopbackIPv6, d.LoopbackIPv6Key = strp(v6), lcKey(v6)
			case 2:
				v4 := fmt.Sprintf("10.0.0.%d", nextV4)
				nextV4++
				d.LoopbackIP, d.LoopbackIPKey = strp(v4), lcKey(v4)
			}
			if err := db.Create(&d).Error; err != nil {
				t.Fatal(err)
			}
		}
	}
	spec := func(h int, serials ...string) ReportSpec {
		r := ReportSpec{BmcMacAddress: plainMAC(h)}
		for _, s := range serials {
			r.DPUs = append(r.DPUs, ReportDPU{SerialNumber: s})
		}
		return r
	}
	two := func(h int) ReportSpec { return spec(h, fmt.Sprintf("S%02d-0", h), fmt.Sprintf("S%02d-1", h)) }
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for h := 0; h < 8; h++ {
		must(a.Report(ctx, two(h)))
	}
	must(a.Decommission(ctx, HostMachineID(plainMAC(3))))
	must(a.DeleteMachine(ctx, HostMachineID(plainMAC(4)), true)) // its values stay quarantined for it
	must(a.Discover(ctx, DiscoverSpec{SerialNumber: "S20-1"}))   // a host-less DPU

	var batch []ReportSpec
	for h := 8; h < 30; h++ {
		batch = append(batch, two(h))
	}
	batch = append(batch,
		two(0), two(1), // repeats: nothing changes
		two(3),                             // decommissioned: 409
		two(4),                             // force deleted: takes its quarantined values back
		spec(5, "S05-0", "S05-1", "S06-0"), // a DPU moved from host 6
		spec(11, "S11-0", "S11-9"),         // S11-9 is declared by host 30's ExpectedMachine
		spec(8, "S08-0"),                   // host 8 again in the batch
		spec(31, "S09-1", "S31-0"),         // a DPU of another report of the batch
		ReportSpec{BmcMacAddress: plainMAC(7), ChassisSerialNumber: "CHS-NEW", DPUs: two(7).DPUs}, // chassis changed
		spec(32), // a host without DPUs
	)
	rnd.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
	if len(batch) > maxReportBatch {
		batch = batch[:maxReportBatch]
	}
	return &plainSiteFixture{a: a, reports: batch}
}

// reportKey names a report of the batch by its validated BMC MAC and
// serials.
func reportKey(t *testing.T, spec ReportSpec) string {
	t.Helper()
	r, err := newReport(spec)
	if err != nil {
		t.Fatal(err)
	}
	return r.mac + " " + strings.Join(r.serials, " ")
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sameIngestState fails when the stored state a report can change differs
// between the batch's database and the one-by-one one, naming the first
// differing line.
func sameIngestState(t *testing.T, batch, alone *gorm.DB) {
	t.Helper()
	got, want := ingestDump(t, batch), ingestDump(t, alone)
	if got == want {
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	for k := 0; k < min(len(gl), len(wl)); k++ {
		if gl[k] != wl[k] {
			t.Fatalf("stored state differs at line %d:\nbatch %s\nalone %s", k, gl[k], wl[k])
		}
	}
	t.Fatalf("stored state differs in length: batch %d lines, alone %d", len(gl), len(wl))
}

// ingestDump renders the stored state a report can change, without row ids.
func ingestDump(t *testing.T, db *gorm.DB) string {
	t.Helper()
	var b strings.Builder
	var ms []models.Machine
	var ncs []models.NetworkConfig
	var as []models.Allocation
	var evs []models.AuditEvent
	for _, q := range []struct {
		dest  any
		order string
	}{{&ms, "machine_id"}, {&ncs, "machine_id"}, {&as, "pool_id, value_key"}, {&evs, "id"}} {
		if err := db.Order(q.order).Find(q.dest).Error; err != nil {
			t.Fatal(err)
		}
	}
	for i := range ms {
		ms[i].CreatedAt, ms[i].UpdatedAt = ms[i].CreatedAt.UTC(), ms[i].UpdatedAt.UTC()
		fmt.Fprintln(&b, jsonOf(t, ms[i]))
	}
	for i := range ncs {
		ncs[i].UpdatedAt = ncs[i].UpdatedAt.UTC()
		fmt.Fprintln(&b, jsonOf(t, ncs[i]))
	}
	for i := range as {
		as[i].ID = 0
		as[i].AllocatedAt = as[i].AllocatedAt.UTC()
		if as[i].QuarantinedAt != nil {
			q := as[i].QuarantinedAt.UTC()
			as[i].QuarantinedAt = &q
		}
		fmt.Fprintln(&b, jsonOf(t, as[i]))
	}
	for i := range evs {
		evs[i].ID, evs[i].Revision = 0, nil
		evs[i].At = evs[i].At.UTC()
		fmt.Fprintln(&b, jsonOf(t, evs[i]))
	}
	return b.String()
}
