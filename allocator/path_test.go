package allocator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

// fndEachPath runs fn on SQLite and PostgreSQL for every Path an
// allocator can be forced to take, each on a database of its own.
func fndEachPath(t *testing.T, fn func(t *testing.T, f *fnd)) {
	t.Helper()
	for _, path := range Paths {
		t.Run(string(path), func(t *testing.T) {
			t.Parallel()
			dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
				f := newFnd(t, db, 0)
				f.a = New(db, Options{Now: f.clock.Now, ForcePath: path})
				fn(t, f)
			})
		})
	}
}

// storedRow is one allocation or audit event as stored, without the ids
// the database chose.
type storedRow struct {
	Kind, A, B, C, D, E, F, G, H string
}

// pathDump is what the allocations of path leave on db: the allocations
// and every audit event, field by field.
func pathDump(t *testing.T, db *gorm.DB) []storedRow {
	t.Helper()
	var allocs []models.Allocation
	if err := db.Order("pool_id, value_key").Find(&allocs).Error; err != nil {
		t.Fatal(err)
	}
	var events []models.AuditEvent
	if err := db.Order("id").Find(&events).Error; err != nil {
		t.Fatal(err)
	}
	var out []storedRow
	for _, r := range allocs {
		out = append(out, storedRow{"allocation", r.Value, r.ValueKey, r.State, deref(r.OwnerType) + "/" + deref(r.OwnerID),
			fmt.Sprint(r.RunEnd), r.AllocatedAt.UTC().String(), timeText(r.QuarantinedAt), deref(r.FormerOwnerType) + "/" + deref(r.FormerOwnerID)})
	}
	for _, e := range events {
		out = append(out, storedRow{"event", e.At.UTC().String(), e.Actor, deref(e.ActorRole), e.Action, e.ObjectType + " " + e.ObjectID,
			e.RequestID, deref(e.BeforeJSON), deref(e.AfterJSON) + " names " + deref(e.NamesJSON)})
	}
	return out
}

// Every path leaves the same rows: the same sequence of allocations and
// releases, made one after the other by callers with their own actor,
// role and request id, run on each path (on PostgreSQL the guessed paths
// commit on their guess after the first group) leaves allocations and
// audit events equal, field by field, to those of PathSingle, the
// general path one transaction at a time. Two owners are machines, a
// host whose ExpectedMachine is renamed midway and a DPU: their events
// keep the names they had (audit_names.go).
func TestEveryPathWritesTheSameRows(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			dumps := map[Path][]storedRow{}
			for _, path := range Paths {
				db := dbtest.Open(t, d)
				f := newFnd(t, db, 0)
				f.a = New(db, Options{Now: f.clock.Now, ForcePath: path})
				f.mkPool(PoolLoopbackV4, "ipv4", 0,
					rng("10.0.0.0", "10.0.0.7", true),
					rng("10.0.0.8", "10.0.0.11", false),
					rng("10.0.0.12", "10.0.0.63", true))
				f.declare("PATH-DECL", "10.0.0.14", "")
				host, dpu := pathMachines(t, f)
				call := func(i int) context.Context {
					return audit.WithActorRole(context.Background(), fmt.Sprint("user", i%3), []string{"operator", "admin", ""}[i%3], fmt.Sprint("req-", i))
				}
				held := map[string]string{}
				for i := 0; i < 30; i++ {
					owner := own(fmt.Sprint("o", i))
					if i%7 == 6 {
						owner = own(fmt.Sprint("o", i-3)) // holds a value already: no event
					}
					switch i {
					case 4:
						owner = own(host)
					case 11:
						owner = own(dpu)
					case 15:
						if err := db.Model(&models.ExpectedMachine{}).Where("id = ?", "em-path").Update("metadata_name", "rack-path-new").Error; err != nil {
							t.Fatal(err)
						}
					}
					al, _, err := f.a.Allocate(call(i), PoolLoopbackV4, owner, "")
					if err != nil {
						t.Fatalf("%s: allocation %d: %v", path, i, err)
					}
					held[owner.ID] = al.Value
					if i == 20 { // holes below the free run
						f.release(PoolLoopbackV4, held["o3"], "o3")
						f.release(PoolLoopbackV4, held["o14"], "o14")
						f.release(PoolLoopbackV4, held[host], host)
					}
				}
				hits, _ := f.a.GroupCommitGuesses()
				if guesses := d == models.Postgres && path.guesses(); guesses != (hits > 0) {
					t.Fatalf("%s: %d allocations committed on a guess", path, hits)
				}
				if pipelines := d == models.Postgres && path.pgPipelines(); pipelines != (f.a.pgFastGroups.Load() > 0) {
					t.Fatalf("%s: %d group commits on the pipelines", path, f.a.pgFastGroups.Load())
				}
				f.checkRunEnds(PoolLoopbackV4)
				f.checkRangeCounts(PoolLoopbackV4)
				dumps[path] = pathDump(t, db)
			}
			want := dumps[PathSingle]
			var names []string
			for _, r := range want {
				if _, n, ok := strings.Cut(r.H, " names "); ok && n != "" {
					names = append(names, r.D+" "+n)
				}
			}
			host, dpu := HostMachineID("02:00:00:00:0a:01"), DPUMachineID("PATH-DPU-1")
			if got, want := strings.Join(names, "\n"), strings.Join([]string{
				`allocation.create {"` + host + `":"rack-path"}`,
				`allocation.create {"` + dpu + `":"PATH-DPU-1"}`,
				`allocation.release {"` + host + `":"rack-path-new"}`,
			}, "\n"); got != want {
				t.Fatalf("events with names:\n%s\nwant\n%s", got, want)
			}
			for _, path := range Paths[1:] {
				got := dumps[path]
				if len(got) != len(want) {
					t.Fatalf("%s left %d rows, %s %d", path, len(got), PathSingle, len(want))
				}
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("%s, row %d:\n got %+v\nwant %+v (%s)", path, i, got[i], want[i], PathSingle)
					}
				}
			}
		})
	}
}

func timeText(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().String()
}

// pathMachines stores a host, whose ExpectedMachine em-path names it
// rack-path, and a DPU of it (as rows: ingesting them would allocate
// their loopbacks), and returns their machine_ids.
func pathMachines(t *testing.T, f *fnd) (host, dpu string) {
	t.Helper()
	mac := "02:00:00:00:0a:01"
	host, dpu = HostMachineID(mac), DPUMachineID("PATH-DPU-1")
	now := f.clock.Now()
	em := models.ExpectedMachine{ID: "em-path", BmcMacAddress: mac, ChassisSerialNumber: "CH-PATH", MetadataName: "rack-path",
		FallbackDPUSerialNumbers: "[]", MetadataLabels: "[]", Version: 1, CreatedAt: now, UpdatedAt: now}
	rows := []models.Machine{
		{MachineID: host, Kind: KindHost, State: StateReady, BmcMacAddress: strp(mac), ChassisSerialNumber: "CH-PATH",
			ExpectedMachineID: strp(em.ID), Version: 1, CreatedAt: now, UpdatedAt: now},
		{MachineID: dpu, Kind: KindDPU, HostMachineID: strp(host), State: StateReady, SerialNumber: strp("PATH-DPU-1"),
			Version: 1, CreatedAt: now, UpdatedAt: now},
	}
	if err := f.db.Create(&em).Error; err != nil {
		t.Fatal(err)
	}
	if err := f.db.Create(&rows).Error; err != nil {
		t.Fatal(err)
	}
	return host, dpu
}
