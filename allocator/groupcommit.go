package allocator

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

// Group commit of automatic allocations (docs/decisions.md
// "Group commit of automatic allocations").
//
// The allocations of one pool are serialized by the pool's row lock: two
// writers must not pick the same "lowest free" value, so one pool gives at
// most 1 / (lock hold time) transactions per second. The automatic Allocate
// calls of one pool that arrive in the same process while an earlier batch
// runs queue up, and one goroutine per pool runs the queue as the next
// batch: one transaction, one lock acquisition, one set-based gap search,
// one multi-row INSERT, one audit INSERT and one commit for all of them.
// The result is the one the requests would have got one after the other in
// arrival order (the same lowest-free values, the same idempotence by
// owner, an audit event per allocation with its own actor and request id).
// When a batch of several fails on a database error, its requests are run
// again one transaction each, so an error reaches only the caller it
// belongs to. Batches of different pools run side by side (per-pool
// locking), and several server processes still serialize on the row lock.

// maxGroupCommit caps the allocations of one transaction, so that a long
// queue does not make one transaction (and its lock hold) arbitrarily long.
const maxGroupCommit = 64

// allocReq is one queued automatic Allocate call.
type allocReq struct {
	ctx   context.Context
	owner Owner

	// state is reqWaiting until the batch claims the request just before
	// writing its allocation (reqClaimed) or the caller leaves first
	// (reqAbandoned): exactly one of the two happens.
	state atomic.Int32

	done    chan struct{} // closed when out/created/err are set
	out     Allocation
	created bool
	err     error
}

const (
	reqWaiting int32 = iota
	reqClaimed
	reqAbandoned
)

// claim marks r as being written; false if its caller has left or its
// context is done (then it is abandoned here). Repeated claims (a retried
// transaction) succeed.
func (r *allocReq) claim() bool {
	if r.ctx.Err() != nil {
		r.state.CompareAndSwap(reqWaiting, reqAbandoned)
	}
	return r.state.CompareAndSwap(reqWaiting, reqClaimed) || r.state.Load() == reqClaimed
}

func (r *allocReq) finish(out Allocation, created bool, err error) {
	r.out, r.created, r.err = out, created, err
	close(r.done)
}

// allocQueue is the queue of one pool while its leader runs: one leader
// per pool and process (docs/decisions.md "One leader per pool and
// process").
type allocQueue struct {
	pending []*allocReq
	running bool
}

// allocateAuto queues an automatic allocation of pool for owner and waits
// for its batch. A caller gets 503 unavailable only when its allocation was
// not made: when ctx ends before the batch claims the request (just before
// writing it), the caller leaves at once and the batch leaves the request
// out; once claimed, the caller waits for the commit's answer, and when
// that answer is lost (a deadline or the database going away during
// COMMIT) the batch reads what was stored before answering (resolveGroup).
func (a *Allocator) allocateAuto(ctx context.Context, pool string, owner Owner) (Allocation, bool, error) {
	if ctx.Err() != nil {
		return Allocation{}, false, errAbandoned(ctx)
	}
	r := &allocReq{ctx: ctx, owner: owner, done: make(chan struct{})}
	a.qmu.Lock()
	q, ok := a.queues[pool]
	if !ok {
		q = &allocQueue{}
		a.queues[pool] = q
	}
	q.pending = append(q.pending, r)
	lead := !q.running
	q.running = true
	a.qmu.Unlock()
	if lead {
		// No batch of this pool is running in this process: the caller
		// runs the next one itself (its own request is in it), so that a
		// lone request costs no hand-off to another goroutine and back;
		// what queues meanwhile goes to a leader goroutine.
		a.leadFirstGroup(pool, q)
		<-r.done
		return r.out, r.created, r.err
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		if r.state.CompareAndSwap(reqWaiting, reqAbandoned) {
			return Allocation{}, false, errAbandoned(ctx)
		}
		<-r.done // claimed: being committed, the answer follows
	}
	return r.out, r.created, r.err
}

// errAbandoned is the 503 of a request that left before it was allocated.
func errAbandoned(ctx context.Context) error {
	return fault.Errf(fault.CodeUnavailable, "", "request cancelled or timed out (%v) before its allocation was made; nothing was allocated, retry", context.Cause(ctx))
}

// leadFirstGroup runs the first batch of pool's queue on the caller's
// goroutine; what queued meanwhile goes to a leader goroutine
// (drainAllocations) together with the connection and the guess.
func (a *Allocator) leadFirstGroup(pool string, q *allocQueue) {
	lc := &leaderConn{}
	a.qmu.Lock()
	lc.guess = a.guesses[pool]
	batch, ok := a.takeGroup(pool, q, lc)
	a.qmu.Unlock()
	if ok {
		a.runGroupCommitOn(lc, pool, batch)
		a.qmu.Lock()
		batch, ok = a.takeGroup(pool, q, lc)
		a.qmu.Unlock()
	}
	if !ok {
		lc.drop()
		return
	}
	go a.drainAllocations(pool, q, lc, batch)
}

// drainAllocations runs batch and then pool's queue batch after batch
// until it is empty.
func (a *Allocator) drainAllocations(pool string, q *allocQueue, lc *leaderConn, batch []*allocReq) {
	defer lc.drop()
	for ok := true; ok; {
		a.runGroupCommitOn(lc, pool, batch)
		a.qmu.Lock()
		batch, ok = a.takeGroup(pool, q, lc)
		a.qmu.Unlock()
	}
}

// takeGroup takes the next batch off pool's queue (a.qmu held); false when
// the queue is empty, and then the pool has no leader any more.
func (a *Allocator) takeGroup(pool string, q *allocQueue, lc *leaderConn) ([]*allocReq, bool) {
	n := len(q.pending)
	if n == 0 {
		q.running = false
		delete(a.queues, pool)
		// The next leader of this pool starts from this one's guess
		// (groupcommit_guess.go): a pool allocated from now and then, or one
		// of many pools, still commits in one round trip.
		a.guesses[pool] = lc.guess
		return nil, false
	}
	n = min(n, maxGroupCommit)
	batch := q.pending[:n:n]
	q.pending = append([]*allocReq(nil), q.pending[n:]...)
	return batch, true
}

// runGroupCommitOn allocates for every request of batch in one
// transaction on the leader's connection (PostgreSQL), falling back to one
// transaction per request when that fails.
func (a *Allocator) runGroupCommitOn(lc *leaderConn, pool string, batch []*allocReq) {
	live := make([]*allocReq, 0, len(batch))
	for _, r := range batch {
		if r.ctx.Err() != nil || r.state.Load() == reqAbandoned {
			r.finish(Allocation{}, false, errAbandoned(r.ctx))
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	defer func() {
		if v := recover(); v != nil {
			a.log.Error("panic in allocation batch", "pool", pool, "panic", v)
			for _, r := range live {
				select {
				case <-r.done:
				default:
					r.finish(Allocation{}, false, fmt.Errorf("internal error allocating from pool %q", pool))
				}
			}
		}
	}()
	ctx, cancel := groupContext(live)
	defer cancel()
	// When every caller has left, stop (e.g. waiting for the lock).
	var remaining atomic.Int32
	remaining.Store(int32(len(live)))
	for _, r := range live {
		stop := context.AfterFunc(r.ctx, func() {
			if remaining.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	start := time.Now()
	now := a.now() // allocated_at of every value of this batch
	owners := make([]autoOwner, len(live))
	for i, r := range live {
		owners[i] = autoOwner{ctx: r.ctx, owner: r.owner, claim: r.claim}
	}
	var (
		results []allocResult
		err     = errGeneralPath
	)
	earlierTry := false
	if a.dialect == models.Postgres && a.path.pgPipelines() {
		results, err = a.groupCommitPG(ctx, lc, pool, owners, now)
		if _, final := fault.AsError(err); err != nil && !final && !errors.Is(err, errGeneralPath) {
			earlierTry = true
			a.log.Debug("allocation batch: fast path failed, using the general path", "pool", pool, "error", err)
		}
	}
	if _, final := fault.AsError(err); err != nil && !final {
		err = a.write(ctx, func(t *tx) error {
			t.now = now
			if t.attempt > 0 {
				earlierTry = true // the last attempt may have committed
			}
			if a.testHookGroupCommitFail != nil {
				if err := a.testHookGroupCommitFail(len(live)); err != nil {
					return err
				}
			}
			p, err := t.lockPool(pool)
			if err != nil {
				return err
			}
			results, err = t.allocateLowestFree(p, owners, false)
			return err
		})
	}
	if a.onGroupCommit != nil {
		a.onGroupCommit(pool, len(live), time.Since(start))
	}
	if err == nil {
		made := map[Owner]bool{}
		for i, r := range live {
			res := results[i]
			if res.err != nil {
				r.finish(Allocation{}, false, res.err)
				continue
			}
			// An earlier try (the fast path, or a retried attempt) whose
			// COMMIT went through while its answer was lost leaves the
			// owners already holding values allocated at this batch's own
			// time: this batch made them, so the first request of each
			// owner is still a 201, as resolveGroup decides.
			created := res.created || (earlierTry && !made[r.owner] && res.row.AllocatedAt.Equal(now))
			made[r.owner] = true
			r.finish(allocationOut(pool, res.row), created, nil)
		}
		return
	}
	if e, ok := fault.AsError(err); ctx.Err() != nil || database.IsUnavailable(err) || (ok && e.Code == fault.CodeUnavailable) {
		// Cut short by a deadline, or the database went away: the commit
		// may have happened all the same (a deadline passing while COMMIT
		// is in flight cannot stop it). Look before answering.
		a.resolveGroup(pool, live, now)
		return
	}
	if e, ok := fault.AsError(err); len(live) == 1 || (ok && e.Code == fault.CodeNotFound) {
		for _, r := range live {
			r.finish(Allocation{}, false, err)
		}
		return
	}
	a.log.Warn("allocation batch failed; running its requests one transaction each", "pool", pool, "size", len(live), "error", err)
	for _, r := range live {
		a.allocateClaimed(pool, r)
	}
}

// resolveGroup answers the requests of a batch whose outcome is unknown
// (cut short by its deadline, or the database unreachable) from what the
// database holds now, read on a fresh connection once the pool's lock is
// free (so after the lost COMMIT has finished either way): an owner holding a value
// allocated at the batch's time got it from this batch (201 for its first
// request, 200 for the others); an owner holding an older value gets it
// (200); a request whose owner holds nothing was not allocated: 503 if its
// caller has left, else it runs again on its own (allocateClaimed). If the database
// cannot be read either, nobody can know yet: 503 telling the caller to
// retry (allocation is idempotent by owner).
func (a *Allocator) resolveGroup(pool string, live []*allocReq, groupNow time.Time) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(live[0].ctx), 10*time.Second)
	defer cancel()
	var held map[Owner]*models.Allocation
	// Under the pool's lock: a COMMIT still in flight holds it, so the
	// read sees that transaction's outcome, whichever it was.
	err := a.write(ctx, func(t *tx) error {
		p, err := t.lockPool(pool)
		if err != nil {
			return err
		}
		owners := make([]autoOwner, len(live))
		for i, r := range live {
			owners[i] = autoOwner{owner: r.owner}
		}
		held, err = t.heldBy(p, owners)
		return err
	})
	if err != nil {
		for _, r := range live {
			r.finish(Allocation{}, false, fault.Errf(fault.CodeUnavailable, "",
				"the database did not confirm the allocation and cannot be read now; retry (allocation is idempotent by owner)"))
		}
		return
	}
	answered := map[Owner]bool{}
	for _, r := range live {
		if row, ok := held[r.owner]; ok {
			created := row.AllocatedAt.Equal(groupNow) && !answered[r.owner] && r.state.Load() == reqClaimed
			answered[r.owner] = true
			r.finish(allocationOut(pool, row), created, nil)
			continue
		}
		a.allocateClaimed(pool, r)
	}
}

// groupContext is the context of a batch's transaction: the values of its
// first request, not cancelled by any one caller leaving, and bounded by
// the latest deadline among the requests (none if one has none). A caller
// with an earlier deadline leaves on its own before its request is claimed
// (and is left out); once claimed it waits for the commit, which follows
// within milliseconds.
func groupContext(reqs []*allocReq) (context.Context, context.CancelFunc) {
	base := context.WithoutCancel(reqs[0].ctx)
	var latest time.Time
	for _, r := range reqs {
		d, ok := r.ctx.Deadline()
		if !ok {
			return context.WithCancel(base)
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(base, latest)
}

// allocateClaimed runs a request alone after its batch failed, if its
// caller is still there; claimed, the caller waits for this answer, so it
// runs under a context of its own (bounded) rather than the caller's
// deadline, whose passing during COMMIT would leave the outcome unknown.
func (a *Allocator) allocateClaimed(pool string, r *allocReq) {
	if !r.claim() {
		r.finish(Allocation{}, false, errAbandoned(r.ctx))
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), claimedTimeout)
	defer cancel()
	out, created, err := a.allocateOne(ctx, pool, r.owner, "")
	r.finish(out, created, err)
}

// claimedTimeout bounds the one-by-one run of a claimed request.
const claimedTimeout = 30 * time.Second
