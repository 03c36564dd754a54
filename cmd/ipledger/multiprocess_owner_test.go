package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
)

// mpOwnerResult is one answer of an owner allocation.
type mpOwnerResult struct {
	status int
	values string
	code   string
	field  string
}

// mpOwnerFire sends n owner allocations at once, spread over the servers.
func mpOwnerFire(t *testing.T, servers []*mpServer, n int, owner func(i int) string, body string) []mpOwnerResult {
	out := make([]mpOwnerResult, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			status, b := mpCall(t, servers[i%len(servers)], "POST", "/api/v1/owners/endpoint/"+owner(i)+"/allocations", body)
			var v struct {
				Items []struct{ Pool, Value string }
				Error struct{ Code, Field string }
			}
			_ = json.Unmarshal(b, &v)
			out[i] = mpOwnerResult{status: status, values: fmt.Sprint(v.Items), code: v.Error.Code, field: v.Error.Field}
		}(i)
	}
	close(start)
	wg.Wait()
	return out
}

// mpOwnerScenario: 40 owners over the server processes ask at once for a
// value of vni and of lo-ip (30 free): 30 get both, 10 are told
// pool_exhausted naming pools[1] and hold nothing, not even of vni; one
// owner asking from 12 clients at once gets one answer; releasing every
// owner at once leaves the pools empty.
func mpOwnerScenario(t *testing.T, u string, n int) {
	servers := mpStart(t, u, n)
	res := mpOwnerFire(t, servers, 40, func(i int) string { return fmt.Sprint("e-", i) }, `{"pools":["vni","lo-ip"]}`)
	served, exhausted := 0, 0
	for i, r := range res {
		switch {
		case r.status == 200:
			served++
		case r.status == 409 && r.code == "pool_exhausted" && r.field == "pools[1]":
			exhausted++
		default:
			t.Fatalf("client %d: %+v", i, r)
		}
	}
	if served != 30 || exhausted != 10 {
		t.Fatalf("%d owners served and %d exhausted; want 30 and 10", served, exhausted)
	}
	one := mpOwnerFire(t, servers, 12, func(int) string { return "the-one" }, `{"pools":[{"pool":"lo-ip","value":"10.0.0.210"},"vni"]}`)
	for i, r := range one {
		if r.status != 200 || r.values != one[0].values {
			t.Fatalf("one-owner client %d: %+v, first %+v", i, r, one[0])
		}
	}

	db, _, err := database.Open(u)
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := db.DB()
	defer sqlDB.Close()
	count := func(q string) int64 {
		var n int64
		if err := db.Raw(q).Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got := count(`SELECT COUNT(*) FROM allocations`); got != 62 {
		t.Fatalf("%d allocations stored, want 62 (30 owners x 2, the-one x 2)", got)
	}
	if got := count(`SELECT COUNT(*) FROM (SELECT owner_id FROM allocations GROUP BY owner_id HAVING COUNT(*) <> 2) x`); got != 0 {
		t.Fatalf("%d owners hold a value of one pool only", got)
	}
	if got := count(`SELECT COUNT(*) FROM (SELECT pool_id, value_key FROM allocations GROUP BY pool_id, value_key HAVING COUNT(*) > 1) x`); got != 0 {
		t.Fatalf("%d values held twice", got)
	}

	// Every owner released at once, over the servers.
	var wg sync.WaitGroup
	for i := 0; i <= 40; i++ {
		owner := fmt.Sprint("e-", i)
		if i == 40 {
			owner = "the-one"
		}
		wg.Add(1)
		go func(s *mpServer) {
			defer wg.Done()
			if code, b := mpCall(t, s, "DELETE", "/api/v1/owners/endpoint/"+owner+"/allocations", ""); code != 204 {
				t.Errorf("release %s: %d %s", owner, code, b)
			}
		}(servers[i%len(servers)])
	}
	wg.Wait()
	if got := count(`SELECT COUNT(*) FROM allocations`); got != 0 {
		t.Fatalf("%d allocations left after every owner released", got)
	}
	if got := count(`SELECT COUNT(*) FROM audit_events WHERE action = 'allocation.release'`); got != 62 {
		t.Fatalf("%d release events, want 62", got)
	}
}

func TestMultiProcessOwnerAllocationsPostgres(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	mpOwnerScenario(t, dbtest.NewPostgresURL(t), 2)
}

func TestMultiProcessOwnerAllocationsSQLiteFile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	mpOwnerScenario(t, "sqlite:"+filepath.Join(t.TempDir(), "site.db"), 2)
}
