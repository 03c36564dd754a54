package allocator

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

// ownerReqs reads "pool" and "pool=value" entries.
func ownerReqs(entries ...string) []OwnerPoolRequest {
	out := make([]OwnerPoolRequest, len(entries))
	for i, e := range entries {
		pool, val, _ := strings.Cut(e, "=")
		out[i] = OwnerPoolRequest{Pool: pool, Value: val}
	}
	return out
}

// wantKernelError checks err's code and field, and that its message holds
// every one of words.
func wantKernelError(t *testing.T, err error, code fault.Code, field string, words ...string) {
	t.Helper()
	if msg := refusalMismatch(err, code, field, words...); msg != "" {
		t.Fatal(msg)
	}
}

// refusalMismatch says how err differs from the expected refusal ("" when
// it does not).
func refusalMismatch(err error, code fault.Code, field string, words ...string) string {
	e, ok := fault.AsError(err)
	if !ok || e.Code != code || e.Field != field {
		return fmt.Sprintf("got %v, want %s on field %q", err, code, field)
	}
	for _, w := range words {
		if !strings.Contains(e.Message, w) {
			return fmt.Sprintf("message %q does not name %q", e.Message, w)
		}
	}
	return ""
}

// lastEventID is the id of the newest audit event (0 when none).
func (f *fnd) lastEventID() int64 {
	f.t.Helper()
	var id int64
	if err := f.db.Raw(`SELECT COALESCE(MAX(id), 0) FROM audit_events`).Scan(&id).Error; err != nil {
		f.t.Fatal(err)
	}
	return id
}

// ownerSite is the pools of the owner tests: pod-v4 (auto 10.1.0.1-3,
// explicit 10.1.0.100-110), endpoint-v6 (/96 blocks, auto and explicit)
// and vlan (integers, auto 1-10, explicit 100-110).
func ownerSite(f *fnd) {
	f.mkPool("pod-v4", "ipv4", 0, rng("10.1.0.1", "10.1.0.3", true), rng("10.1.0.100", "10.1.0.110", false))
	f.mkPool("endpoint-v6", "ipv6prefix", 96, rng("fd00:10:ff01::/96", "fd00:10:ff01::ff:0:0/96", true),
		rng("fd00:10:ff01:1::/96", "fd00:10:ff01:1::ff:0:0/96", false))
	f.mkPool("vlan", "integer", 0, rng("1", "10", true), rng("100", "110", false))
}

// docs/api.md "Owner allocations": one value of each pool for the owner,
// in request order, each decided as Allocate decides it; asking again
// returns the same values and writes nothing.
func TestAllocateForOwner(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		ownerSite(f)
		f.alloc("pod-v4", "someone", "")
		pod := Owner{Type: "endpoint", ID: "pod-a"}
		reqs := ownerReqs("vlan", "endpoint-v6=fd00:10:ff01:1::5:0:0/96", "pod-v4")
		out, created, err := f.a.AllocateForOwner(f.ctx, pod, reqs)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"vlan 1", "endpoint-v6 fd00:10:ff01:1:0:5::/96", "pod-v4 10.1.0.2"} // canonical text
		for i, al := range out {
			if got := al.Pool + " " + al.Value; got != want[i] || !created[i] || deref(al.OwnerType) != "endpoint" || deref(al.OwnerID) != "pod-a" || al.State != models.StateAllocated {
				t.Fatalf("item %d: %+v created=%t, want %s", i, al, created[i], want[i])
			}
		}
		for _, pool := range []string{"vlan", "endpoint-v6", "pod-v4"} {
			f.checkRunEnds(pool)
		}
		// Again, in another order and with the held value asked for: the
		// same values, nothing created, nothing written.
		before := f.snap()
		again, created, err := f.a.AllocateForOwner(f.ctx, pod, ownerReqs("pod-v4", "endpoint-v6=fd00:10:ff01:1::5:0:0/96", "vlan"))
		if err != nil {
			t.Fatal(err)
		}
		if again[0].Value != "10.1.0.2" || again[1].Value != out[1].Value || again[2].Value != "1" || created[0] || created[1] || created[2] {
			t.Fatalf("repeat: %+v created=%v", again, created)
		}
		f.unchanged(before, "repeating an owner allocation")
		// A pool the owner already holds a value of, with one it does not:
		// the held one comes back, the new one is allocated.
		f.mkPool("vni", "integer", 0, rng("5000", "5999", true))
		more, created, err := f.a.AllocateForOwner(f.ctx, pod, ownerReqs("pod-v4", "vni"))
		if err != nil || more[0].Value != "10.1.0.2" || created[0] || more[1].Value != "5000" || !created[1] {
			t.Fatalf("held plus new: %+v %v %v", more, created, err)
		}
	})
}

// Each refusal names the entry (pools[i] or pools[i].value) and, in its
// message, the pool and the value; nothing is written, including the
// values of the entries before the refused one.
func TestAllocateForOwnerRefusals(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		ownerSite(f)
		f.mkPool("tiny", "integer", 0, rng("500", "500", true))
		f.alloc("tiny", "holder", "")
		f.alloc("pod-v4", "holder", "10.1.0.105")
		f.quarantine("pod-v4", f.alloc("pod-v4", "gone", "10.1.0.106").Value)
		held := Owner{Type: "endpoint", ID: "held"}
		if _, _, err := f.a.AllocateForOwner(f.ctx, held, ownerReqs("vlan=104")); err != nil {
			t.Fatal(err)
		}
		before := f.snap()
		pod := Owner{Type: "endpoint", ID: "pod-b"}
		cases := []struct {
			name    string
			owner   Owner
			reqs    []OwnerPoolRequest
			code    fault.Code
			field   string
			message []string
		}{
			{"no pools", pod, nil, fault.CodeInvalid, "pools", nil},
			{"empty pool name", pod, ownerReqs("vlan", ""), fault.CodeInvalid, "pools[1]", nil},
			{"unknown pool", pod, ownerReqs("vlan", "nope"), fault.CodeInvalid, "pools[1]", []string{`"nope"`}},
			{"same pool twice", pod, ownerReqs("vlan", "pod-v4", "vlan=101"), fault.CodeInvalid, "pools[2]", []string{`"vlan"`, "pools[0]"}},
			{"malformed value", pod, ownerReqs("vlan", "pod-v4=10.1.0.999"), fault.CodeInvalid, "pools[1].value", []string{`"pod-v4"`, "10.1.0.999"}},
			{"wrong family", pod, ownerReqs("vlan", "pod-v4=fd00::1"), fault.CodeInvalid, "pools[1].value", []string{`"pod-v4"`, "fd00::1"}},
			{"prefix of another length", pod, ownerReqs("endpoint-v6=fd00:10:ff01:1::/64"), fault.CodeInvalid, "pools[0].value", []string{`"endpoint-v6"`}},
			{"held by another owner", pod, ownerReqs("vlan", "pod-v4=10.1.0.105"), fault.CodeNotAvailable, "pools[1].value", []string{`"pod-v4"`, "10.1.0.105", "holder"}},
			{"quarantined", pod, ownerReqs("vlan", "pod-v4=10.1.0.106"), fault.CodeNotAvailable, "pools[1].value", []string{`"pod-v4"`, "10.1.0.106", "quarantined"}},
			{"in an auto range", pod, ownerReqs("vlan", "pod-v4=10.1.0.3"), fault.CodeNotAvailable, "pools[1].value", []string{`"pod-v4"`, "10.1.0.3", "auto-assign"}},
			{"outside the pool", pod, ownerReqs("vlan", "pod-v4=10.9.9.9"), fault.CodeNotAvailable, "pools[1].value", []string{`"pod-v4"`, "10.9.9.9"}},
			{"exhausted", pod, ownerReqs("vlan", "pod-v4", "tiny"), fault.CodePoolExhausted, "pools[2]", []string{`"tiny"`}},
			{"another value than the held one", held, ownerReqs("pod-v4", "vlan=105"), fault.CodeConflict, "pools[1].value", []string{`"vlan"`, "104", "105"}},
			{"bad owner type", Owner{Type: "Bad", ID: "x"}, ownerReqs("vlan"), fault.CodeInvalid, "owner_type", nil},
			{"owner id too long", Owner{Type: "endpoint", ID: strings.Repeat("x", 129)}, ownerReqs("vlan"), fault.CodeInvalid, "owner_id", nil},
		}
		for _, c := range cases {
			_, _, err := f.a.AllocateForOwner(f.ctx, c.owner, c.reqs)
			if msg := refusalMismatch(err, c.code, c.field, c.message...); msg != "" {
				t.Fatalf("%s: %s", c.name, msg)
			}
			f.unchanged(before, c.name)
		}
		// The 422 of a later entry wins over the 409 of an earlier one: a
		// malformed request is refused as such whatever the stored state.
		_, _, err := f.a.AllocateForOwner(f.ctx, pod, ownerReqs("tiny", "pod-v4=x"))
		wantKernelError(t, err, fault.CodeInvalid, "pools[1].value")
		// Of two 409s, the first entry's.
		_, _, err = f.a.AllocateForOwner(f.ctx, pod, ownerReqs("pod-v4=10.1.0.105", "tiny"))
		wantKernelError(t, err, fault.CodeNotAvailable, "pools[0].value")
		f.unchanged(before, "refused owner allocations")
		tooMany := make([]OwnerPoolRequest, MaxOwnerPools+1)
		for i := range tooMany {
			tooMany[i].Pool = fmt.Sprint("p", i)
		}
		_, _, err = f.a.AllocateForOwner(f.ctx, pod, tooMany)
		wantKernelError(t, err, fault.CodeInvalid, "pools", fmt.Sprint(MaxOwnerPools))
	})
}

// The audit events of an owner allocation and of its release are those
// of single allocations and releases of the same values, field by field
// (apart from the id): the change feed shows them with pool and value.
func TestOwnerAllocationEventsEqualSingle(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		for _, name := range []string{"a-vlan", "a-vni", "b-vlan", "b-vni"} {
			f.mkPool(name, "integer", 0, rng("1", "20", true), rng("100", "120", false))
		}
		owner := Owner{Type: "endpoint", ID: "e"}
		mark := f.lastEventID()
		if _, _, err := f.a.AllocateForOwner(f.ctx, owner, ownerReqs("a-vni", "a-vlan=105")); err != nil {
			t.Fatal(err)
		}
		if _, err := f.a.ReleaseOwner(f.ctx, owner); err != nil {
			t.Fatal(err)
		}
		if _, _, err := f.a.Allocate(f.ctx, "b-vni", owner, ""); err != nil {
			t.Fatal(err)
		}
		if _, _, err := f.a.Allocate(f.ctx, "b-vlan", owner, "105"); err != nil {
			t.Fatal(err)
		}
		for _, rel := range [][2]string{{"b-vlan", "105"}, {"b-vni", "1"}} {
			if err := f.a.Release(f.ctx, rel[0], rel[1], owner); err != nil {
				t.Fatal(err)
			}
		}
		var evs []models.AuditEvent
		if err := f.db.Where("id > ?", mark).Order("id").Find(&evs).Error; err != nil {
			t.Fatal(err)
		}
		if len(evs) != 8 {
			t.Fatalf("%d events, want 8", len(evs))
		}
		norm := func(e models.AuditEvent) string {
			e.ID, e.Revision = 0, nil
			e.ObjectID = strings.Replace(e.ObjectID, "a-", "b-", 1)
			for _, p := range []*string{e.BeforeJSON, e.AfterJSON} {
				if p != nil {
					*p = strings.ReplaceAll(*p, `"a-`, `"b-`)
				}
			}
			b, _ := json.Marshal(e)
			return string(b)
		}
		// The owner's writes: a-vni 1, a-vlan 105 created; released in pool
		// name order. The single ones: b-vni, b-vlan, then b-vlan, b-vni.
		for i := range 4 {
			if got, want := norm(evs[i]), norm(evs[4+i]); got != want {
				t.Fatalf("event %d of the owner calls:\n %s\nsingle calls:\n %s", i, got, want)
			}
		}
		if evs[0].Action != "allocation.create" || evs[0].ObjectID != "a-vni/1" || evs[2].Action != "allocation.release" || evs[2].ObjectID != "a-vlan/105" {
			t.Fatalf("events %+v", evs[:4])
		}
	})
}

// docs/api.md "Owner allocations": everything the owner holds is released
// in one transaction, with one allocation.release event per value and
// exact run ends; other owners and quarantines stay; nothing held is a
// no-op that writes nothing.
func TestReleaseOwner(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		ownerSite(f)
		pod := Owner{Type: "endpoint", ID: "pod-a"}
		if _, _, err := f.a.AllocateForOwner(f.ctx, pod, ownerReqs("vlan", "pod-v4", "endpoint-v6=fd00:10:ff01:1::/96")); err != nil {
			t.Fatal(err)
		}
		f.alloc("vlan", "other", "")
		f.quarantine("pod-v4", f.alloc("pod-v4", "gone", "").Value)
		mark := f.lastEventID()
		released, err := f.a.ReleaseOwner(f.ctx, pod)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range released {
			got = append(got, r.Pool+" "+r.Value)
		}
		if fmt.Sprint(got) != "[endpoint-v6 fd00:10:ff01:1::/96 pod-v4 10.1.0.1 vlan 1]" {
			t.Fatalf("released %v", got)
		}
		if n := f.countRows(&models.Allocation{}, "owner_type = ? AND owner_id = ?", pod.Type, pod.ID); n != 0 {
			t.Fatalf("the owner still holds %d values", n)
		}
		var evs []models.AuditEvent
		if err := f.db.Where("id > ?", mark).Order("id").Find(&evs).Error; err != nil {
			t.Fatal(err)
		}
		var objs []string
		for _, e := range evs {
			if e.Action != "allocation.release" || e.BeforeJSON == nil || !strings.Contains(*e.BeforeJSON, `"owner_id":"pod-a"`) {
				t.Fatalf("event %+v", e)
			}
			objs = append(objs, e.ObjectID)
		}
		if fmt.Sprint(objs) != "[endpoint-v6/fd00:10:ff01:1::/96 pod-v4/10.1.0.1 vlan/1]" {
			t.Fatalf("release events %v", objs)
		}
		for _, pool := range []string{"vlan", "endpoint-v6", "pod-v4"} {
			f.checkRunEnds(pool)
		}
		if n := f.countRows(&models.Allocation{}, "1 = 1"); n != 2 {
			t.Fatalf("%d allocations left, want the other owner's and the quarantine", n)
		}
		// Nothing held: a no-op.
		before := f.snap()
		if released, err := f.a.ReleaseOwner(f.ctx, pod); err != nil || len(released) != 0 {
			t.Fatalf("second release: %v %v", released, err)
		}
		f.unchanged(before, "releasing an owner that holds nothing")
		_, err = f.a.ReleaseOwner(f.ctx, Owner{Type: "", ID: "x"})
		wantKernelError(t, err, fault.CodeInvalid, "owner_type")
	})
}

// A DPU's loopbacks are never released by hand: releasing everything its
// machine owner holds is 409 conflict naming the DPU, and nothing is
// released, not even the owner's values that no network config carries.
func TestReleaseOwnerRefusesLiveLoopback(t *testing.T) {
	t.Parallel()
	lcEach(t, lcOpts{}, func(t *testing.T, s *lcSite) {
		s.pool("vlan", "integer", rng("1", "10", true))
		s.em(macA)
		s.report(macA, "MT-OWNED")
		mid := DPUMachineID("MT-OWNED")
		owner := Owner{Type: OwnerTypeMachine, ID: mid}
		if _, _, err := s.a.AllocateForOwner(s.ctx, owner, ownerReqs("vlan")); err != nil {
			t.Fatal(err)
		}
		v4, v6 := s.loopbacks("MT-OWNED")
		var before int64
		s.db.Model(&models.AuditEvent{}).Count(&before)
		_, err := s.a.ReleaseOwner(s.ctx, owner)
		wantKernelError(t, err, fault.CodeConflict, "", "MT-OWNED", mid)
		s.wantLoopbacks("MT-OWNED", v4, v6)
		if got := s.heldBy("vlan", mid); got != "1" {
			t.Fatalf("vlan value after the refused release: %q", got)
		}
		var after int64
		s.db.Model(&models.AuditEvent{}).Count(&after)
		if after != before {
			t.Fatalf("a refused release wrote %d events", after-before)
		}
		// Once the host is decommissioned and deleted, the owner's other
		// values are released as any owner's.
		host := s.report(macA, "MT-OWNED").Machines[0].MachineID
		s.decommission(host)
		s.delete(host, false)
		if _, err := s.a.ReleaseOwner(s.ctx, owner); err != nil {
			t.Fatal(err)
		}
		if got := s.heldBy("vlan", mid); got != "" {
			t.Fatalf("vlan value after release: %q", got)
		}
	})
}

// The second pool runs out: nothing of the first is held, on both
// databases, also when many owners race for the last values. 40 owners
// ask for a value of "a" (30 free) and of "b" (25 free) at once, half of
// them listing b first, over two handles (two server processes): exactly
// 25 owners hold one value of each, the 15 others hold nothing and were
// told pool_exhausted naming pools[i] of "b"; every value is held once.
func TestAllocateForOwnerConcurrentOwners(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			as := allocators(t, concurrencyURL(t, d), 2)
			ctx := audit.WithActor(t.Context(), "test", "")
			for name, last := range map[string]string{"a": "30", "b": "25"} {
				if _, err := as[0].CreatePool(ctx, PoolSpec{Name: name, Type: "integer", Ranges: []RangeSpec{rng("1", last, true)}}); err != nil {
					t.Fatal(err)
				}
			}
			const n = 40
			type answer struct {
				out []Allocation
				err error
			}
			res := make([]answer, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					<-start
					reqs := ownerReqs("a", "b")
					if i%2 == 1 {
						reqs = ownerReqs("b", "a")
					}
					out, _, err := as[i%2].AllocateForOwner(ctx, Owner{Type: "endpoint", ID: fmt.Sprint("e", i)}, reqs)
					res[i] = answer{out, err}
				}(i)
			}
			close(start)
			wg.Wait()
			seen := map[string]string{}
			ok := 0
			for i, r := range res {
				if r.err != nil {
					field := "pools[1]"
					if i%2 == 1 {
						field = "pools[0]"
					}
					wantKernelError(t, r.err, fault.CodePoolExhausted, field, `"b"`)
					continue
				}
				ok++
				for _, al := range r.out {
					k := al.Pool + "/" + al.Value
					if prev, dup := seen[k]; dup {
						t.Fatalf("%s handed to %s and e%d", k, prev, i)
					}
					seen[k] = fmt.Sprint("e", i)
				}
			}
			if ok != 25 {
				t.Fatalf("%d owners served, want 25", ok)
			}
			db := as[0].DB()
			checkStoredAllocations(t, db, "a", 25)
			checkStoredAllocations(t, db, "b", 25)
			var partial []string
			if err := db.Raw(`SELECT owner_id FROM allocations GROUP BY owner_id HAVING COUNT(*) <> 2`).Scan(&partial).Error; err != nil {
				t.Fatal(err)
			}
			if len(partial) > 0 {
				t.Fatalf("owners holding a value of one pool only: %v", partial)
			}
		})
	}
}

// One owner asking from several goroutines at once (two handles): every
// answer is the same pair of values, each pool's value was created by
// exactly one of them, and the owner holds one value per pool.
func TestAllocateForOwnerConcurrentSameOwner(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			as := allocators(t, concurrencyURL(t, d), 2)
			ctx := audit.WithActor(t.Context(), "test", "")
			for _, name := range []string{"a", "b"} {
				if _, err := as[0].CreatePool(ctx, PoolSpec{Name: name, Type: "integer", Ranges: []RangeSpec{rng("1", "100", true), rng("200", "210", false)}}); err != nil {
					t.Fatal(err)
				}
			}
			const n = 16
			answers := make([]string, n)
			createdA, createdB := 0, 0
			var mu sync.Mutex
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					<-start
					out, created, err := as[i%2].AllocateForOwner(ctx, Owner{Type: "endpoint", ID: "the-one"}, ownerReqs("a", "b=205"))
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						answers[i] = err.Error()
						return
					}
					answers[i] = out[0].Value + " " + out[1].Value
					if created[0] {
						createdA++
					}
					if created[1] {
						createdB++
					}
				}(i)
			}
			close(start)
			wg.Wait()
			for i, a := range answers {
				if a != "1 205" {
					t.Fatalf("goroutine %d: %s", i, a)
				}
			}
			if createdA != 1 || createdB != 1 {
				t.Fatalf("created a %d times and b %d times, want once each", createdA, createdB)
			}
			checkStoredAllocations(t, as[0].DB(), "a", 1)
			checkStoredAllocations(t, as[0].DB(), "b", 1)
		})
	}
}
