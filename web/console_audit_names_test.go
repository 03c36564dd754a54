package web_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/txn"
)

// The audit log shows the names its events kept and looks up only what an
// event did not keep (docs/console.md "Audit log names"): a page of
// events that kept every name reads no machine or ExpectedMachine to name
// them, and shows them as they were; the same events without their names
// (as events written before schema 33 are) are named as things are now,
// by the look-ups the page always made.
func TestEventsPageLooksUpOnlyNamesNotKept(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := dbtest.Open(t, d)
			site := newConsoleSite(t, db)
			ctx := audit.WithActor(context.Background(), "test", "")
			if _, err := site.a.CreatePool(ctx, allocator.PoolSpec{Name: allocator.PoolLoopbackV4, Type: "ipv4",
				Ranges: []allocator.RangeSpec{{First: "10.1.0.1", Last: "10.1.0.50"}}}); err != nil {
				t.Fatal(err)
			}
			const mac = "0a:00:00:00:90:01"
			em, err := site.a.CreateExpectedMachine(ctx, allocator.ExpectedMachineSpec{BmcMacAddress: mac, ChassisSerialNumber: "CH-9001",
				Metadata: &allocator.Metadata{Name: "rack9-u01"}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := site.a.Report(ctx, allocator.ReportSpec{BmcMacAddress: mac, ChassisSerialNumber: "CH-9001",
				DPUs: []allocator.ReportDPU{{SerialNumber: "MT2242X09001"}}}); err != nil {
				t.Fatal(err)
			}
			if err := site.a.DeleteExpectedMachine(ctx, em.ID, txn.IfMatch{}); err != nil {
				t.Fatal(err)
			}
			// Statements that read machines, ExpectedMachines or the
			// names of deleted machines, while counting is on.
			var counting atomic.Bool
			var lookUps atomic.Int64
			if err := db.Callback().Query().After("gorm:query").Register("test:count_name_look_ups", func(g *gorm.DB) {
				if counting.Load() && strings.Contains(g.Statement.SQL.String(), "machines") {
					lookUps.Add(1)
				}
			}); err != nil {
				t.Fatal(err)
			}
			b := site.login(auth.RoleViewer)
			page := func() (string, int64) {
				t.Helper()
				lookUps.Store(0)
				counting.Store(true)
				body := expect(t, b.get("/events?object_type=machine"), http.StatusOK, "machine.create")
				counting.Store(false)
				return body, lookUps.Load()
			}
			host := `href="/machines/` + allocator.HostMachineID(mac) + `" title="`
			kept, n := page()
			if !strings.Contains(kept, host+"rack9-u01 ") {
				t.Fatalf("the host's events do not show the name they kept:\n%s", clip(kept))
			}
			if n != 0 {
				t.Fatalf("a page of events that kept their names made %d name look-ups; want none", n)
			}
			if err := db.Exec(`UPDATE audit_events SET names_json = NULL`).Error; err != nil {
				t.Fatal(err)
			}
			older, n := page()
			if !strings.Contains(older, host+"CH-9001 ") || strings.Contains(older, "rack9-u01") {
				t.Fatalf("events without names are not named as things are now:\n%s", clip(older))
			}
			if n == 0 {
				t.Fatal("events without names were named with no look-up")
			}
		})
	}
}
