package allocator

import (
	"context"
	"fmt"
	"testing"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/models"
)

// Every automatic allocation's audit event stores the role its requester
// acted with, whichever path wrote it — the general path, the guessed
// INSERT of one pool and, on PostgreSQL, a commit group of several pools
// — and no role for a system actor.
func TestGroupCommitAuditEventsCarryRole(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		pools := []string{"vlan", "net"}
		f.mkPool("vlan", "integer", 0, rng("100", "999", true))
		f.mkPool("net", "ipv4", 0, rng("10.9.0.0", "10.9.3.255", true))
		lcs := map[string]*leaderConn{}
		for _, p := range pools {
			lcs[p] = &leaderConn{}
			defer lcs[p].drop()
		}
		roles := []string{"operator", "admin", "viewer", ""}
		want := map[string]string{} // actor → stored role ("" for NULL)
		next := 0
		batch := func(n int) []*allocReq {
			reqs := make([]*allocReq, n)
			for i := range reqs {
				o := fmt.Sprint("o", next)
				role := roles[next%len(roles)]
				next++
				actor := "user:" + o
				if role == "" {
					actor = "system:" + o
				}
				want[actor] = role
				reqs[i] = &allocReq{ctx: audit.WithActorRole(context.Background(), actor, role, "req-"+o),
					owner: own(o), done: make(chan struct{})}
			}
			return reqs
		}
		hits := f.a.guessHits.Load()
		grouped := f.a.sharedGroupCommits.Load()
		for step := 0; step < 6; step++ {
			for _, p := range pools {
				reqs := batch(3)
				f.a.runGroupCommitOn(lcs[p], p, reqs)
				for _, r := range reqs {
					if r.err != nil {
						t.Fatalf("step %d pool %s: %v", step, p, r.err)
					}
				}
			}
			batches := map[string][]*allocReq{}
			for _, p := range pools {
				batches[p] = batch(4)
			}
			runGrouped(t, f, lcs, batches)
			for p, reqs := range batches {
				for _, r := range reqs {
					if r.err != nil {
						t.Fatalf("step %d grouped pool %s: %v", step, p, r.err)
					}
				}
			}
		}
		if f.a.dialect == models.Postgres {
			if f.a.guessHits.Load() == hits {
				t.Fatal("no batch took the guessed path")
			}
			if f.a.sharedGroupCommits.Load() == grouped {
				t.Fatal("no batch committed in a group")
			}
		}
		var rows []struct {
			Actor     string
			ActorRole *string
		}
		if err := f.db.Raw(`SELECT actor, actor_role FROM audit_events WHERE action = 'allocation.create'`).Scan(&rows).Error; err != nil {
			t.Fatal(err)
		}
		if len(rows) != len(want) {
			t.Fatalf("%d allocation events, want %d", len(rows), len(want))
		}
		for _, r := range rows {
			got := deref(r.ActorRole)
			if r.ActorRole != nil && got == "" {
				t.Fatalf("%s: an empty role stored instead of NULL", r.Actor)
			}
			if w, ok := want[r.Actor]; !ok || got != w {
				t.Fatalf("%s: stored role %q, want %q", r.Actor, got, w)
			}
		}
	})
}
