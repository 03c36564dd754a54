package allocator

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ipledger/ipledger/models"
)

// runGrouped runs one batch per pool at the same time, each on its own
// leader, and on PostgreSQL makes the guessed ones share one group
// transaction (groupcommit_shared.go): the group is held busy until every batch
// has either joined it or finished without it, then the turn is passed
// to the first that joined.
func runGrouped(t *testing.T, f *fnd, lcs map[string]*leaderConn, batches map[string][]*allocReq) {
	t.Helper()
	g := &f.a.shared
	g.mu.Lock()
	g.inflight = maxSharedInFlight
	g.mu.Unlock()
	var wg sync.WaitGroup
	var mu sync.Mutex
	finished := 0
	for pool, reqs := range batches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.a.runGroupCommitOn(lcs[pool], pool, reqs)
			mu.Lock()
			finished++
			mu.Unlock()
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		g.mu.Lock()
		mu.Lock()
		joined, done := len(g.waiting), finished
		mu.Unlock()
		if joined+done >= len(batches) {
			next := g.waiting
			g.waiting = nil
			g.inflight = maxSharedInFlight - 1
			if len(next) == 0 {
				g.inflight = 0
			}
			g.mu.Unlock()
			if len(next) > 0 {
				next[0].wake <- next
			}
			break
		}
		g.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d batches joined the group, %d finished", joined, len(batches), done)
		}
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
}

// Batches of several pools committed in one group transaction give
// exactly what each pool's batches give one by one: three pools (the
// loopback pool with declared values, an integer pool, an IPv4 pool), 150
// steps, each a batch on every pool at once — with owners that already
// hold a value (which rolls a group back, so each batch runs alone),
// owners twice in a batch, releases, another process allocating, values
// declared where the guess would go — checked against the brute-force
// oracle, with exact run-end flags and range counts. On PostgreSQL groups
// of two or more must have committed.
func TestGroupCommitSharedMatchesOneByOne(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		pools := []string{PoolLoopbackV4, "vlan", "net"}
		f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.0.0.0", "10.0.0.31", true), rng("10.0.1.0", "10.0.2.255", true))
		f.mkPool("vlan", "integer", 0, rng("100", "160", true), rng("200", "999", true))
		f.mkPool("net", "ipv4", 0, rng("10.9.0.0", "10.9.3.255", true))
		other := New(f.db, Options{Now: f.clock.Now})
		r := rand.New(rand.NewPCG(20261201, 3))
		lcs := map[string]*leaderConn{}
		for _, p := range pools {
			lcs[p] = &leaderConn{}
			defer lcs[p].drop()
		}
		holders := map[string]map[string]string{} // pool → owner → value
		for _, p := range pools {
			holders[p] = map[string]string{}
		}
		grouped := f.a.sharedGroupCommits.Load()
		next := 0
		for step := 0; step < 150; step++ {
			pool := pools[r.IntN(len(pools))]
			switch op := r.IntN(20); {
			case op == 0: // release a held value
				for o, v := range holders[pool] {
					f.release(pool, v, o)
					delete(holders[pool], o)
					break
				}
			case op == 1: // another process allocates
				o := fmt.Sprint("other", step)
				want := f.oracleFirstFree(pool, 1)
				al, _, err := other.Allocate(f.ctx, pool, own(o), "")
				if err != nil || al.Value != want[0] {
					t.Fatalf("step %d: the other allocator got %s %v, want %s", step, al.Value, err, want[0])
				}
				holders[pool][o] = al.Value
			case op == 2 && pool == PoolLoopbackV4: // declare where the guess goes
				if want := f.oracleFirstFree(pool, 2); len(want) == 2 {
					f.declare(fmt.Sprint("DECL", step), want[r.IntN(2)], "")
				}
			}
			wants := map[string][]string{}
			batches := map[string][]*allocReq{}
			for _, p := range pools {
				var names []string
				for n := 1 + r.IntN(4); len(names) < n; {
					switch k := r.IntN(20); {
					case k == 0 && len(names) > 0:
						names = append(names, names[r.IntN(len(names))])
					case k == 1:
						for o := range holders[p] {
							names = append(names, o)
							break
						}
					default:
						names = append(names, fmt.Sprint("o", next))
						next++
					}
				}
				wants[p] = f.oracleFirstFree(p, len(names))
				batches[p] = f.groupOf(names...)
			}
			runGrouped(t, f, lcs, batches)
			for _, p := range pools {
				got := map[string]string{}
				k := 0
				for i, rq := range batches[p] {
					<-rq.done
					o := rq.owner.ID
					switch {
					case holders[p][o] != "":
						if rq.err != nil || rq.created || rq.out.Value != holders[p][o] {
							t.Fatalf("step %d %s request %d (%s holds %s): %s created=%t %v", step, p, i, o, holders[p][o], rq.out.Value, rq.created, rq.err)
						}
					case got[o] != "":
						if rq.err != nil || rq.created || rq.out.Value != got[o] {
							t.Fatalf("step %d %s request %d (%s again): %s %v, want %s", step, p, i, o, rq.out.Value, rq.err, got[o])
						}
					default:
						if rq.err != nil || !rq.created || rq.out.Value != wants[p][k] {
							t.Fatalf("step %d %s request %d (%s): %s created=%t %v, want %s", step, p, i, o, rq.out.Value, rq.created, rq.err, wants[p][k])
						}
						got[o] = wants[p][k]
						k++
					}
				}
				for o, v := range got {
					holders[p][o] = v
				}
				f.checkRunEnds(p)
			}
		}
		for _, p := range pools {
			f.checkRangeCounts(p)
		}
		n := f.a.sharedGroupCommits.Load() - grouped
		t.Logf("%d batches committed in groups of two or more", n)
		if models.DialectOf(f.db) == models.Postgres && n < 100 {
			t.Fatalf("only %d batches were grouped: the test does not exercise the group", n)
		}
	})
}
