package allocator

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ipledger/ipledger/fault"
)

// Group commit of site-explorer reports (docs/decisions.md "Reports
// arriving together commit as one batch").
//
// Every report locks lo-ip and lo-ip-v6 before it touches a machine row
// (the lock order that keeps reports, deletes and ExpectedMachine edits
// free of deadlocks), so the reports of a site run one at a time. As
// automatic allocations do (groupcommit.go), the reports that arrive in one
// process while a batch runs queue up, and one goroutine runs the queue
// as the next batch: one transaction, one lock acquisition, one commit.
// The batch's plain reports are ingested set-based first (report_plain.go);
// the others then run one after the other in arrival order, each behind a
// savepoint — a report refused (a decommissioned host, 409) is rolled
// back to its savepoint and answers its caller alone, the others commit.
// Each report's writes and audit events are exactly those it makes alone
// (its own actor and request id). When the batch fails on a database
// error, its reports run again one transaction each, so an error reaches
// only its own caller; a report is idempotent, so running again one whose
// commit was lost changes nothing.

// maxReportBatch caps the reports of one transaction (PostgreSQL keeps up
// to 64 subtransactions of a transaction in memory).
const maxReportBatch = 32

// reportReq is one queued report.
type reportReq struct {
	ctx   context.Context
	r     *report
	state atomic.Int32 // reqWaiting, reqClaimed or reqAbandoned (groupcommit.go)
	done  chan struct{}
	res   *IngestResult
	err   error
}

func (q *reportReq) claim() bool {
	if q.ctx.Err() != nil {
		q.state.CompareAndSwap(reqWaiting, reqAbandoned)
	}
	return q.state.CompareAndSwap(reqWaiting, reqClaimed) || q.state.Load() == reqClaimed
}

func (q *reportReq) finish(res *IngestResult, err error) {
	q.res, q.err = res, err
	close(q.done)
}

// reportQueue is the queue of reports while its leader runs (under the
// allocator's qmu).
type reportQueue struct {
	pending []*reportReq
	running bool
	// arrived is signalled when a report is queued while a leader waits
	// for a batch to gather (gather).
	arrived chan struct{}
}

// queueReport queues a validated report and waits for its batch. A caller
// whose context ends before the batch claims its report leaves at once
// with 503 and nothing written; once claimed it waits for the answer.
func (a *Allocator) queueReport(ctx context.Context, r *report) (*IngestResult, error) {
	if ctx.Err() != nil {
		return nil, errAbandoned(ctx)
	}
	q := &reportReq{ctx: ctx, r: r, done: make(chan struct{})}
	a.qmu.Lock()
	a.reports.pending = append(a.reports.pending, q)
	start := !a.reports.running
	a.reports.running = true
	if a.reports.arrived == nil {
		a.reports.arrived = make(chan struct{}, 1)
	}
	arrived := a.reports.arrived
	a.qmu.Unlock()
	signal(arrived)
	if start {
		go a.drainReports()
	}
	select {
	case <-q.done:
	case <-ctx.Done():
		if q.state.CompareAndSwap(reqWaiting, reqAbandoned) {
			return nil, errAbandoned(ctx)
		}
		<-q.done
	}
	return q.res, q.err
}

// drainReports runs the queue batch after batch until it is empty.
func (a *Allocator) drainReports() {
	last, took := 0, time.Duration(0)
	for {
		a.gather(last, took)
		a.qmu.Lock()
		n := len(a.reports.pending)
		if n == 0 {
			a.reports.running = false
			a.qmu.Unlock()
			return
		}
		n = min(n, maxReportBatch)
		batch := a.reports.pending[:n:n]
		a.reports.pending = append([]*reportReq(nil), a.reports.pending[n:]...)
		a.qmu.Unlock()
		start := time.Now()
		a.runReportBatch(batch)
		last, took = n, time.Since(start)
	}
}

// gather lets a batch fill before it runs. A batch costs about the same
// few statements whatever its size, but when the previous batch's callers
// are answered, the next batch would start with only the reports that
// arrived meanwhile (typically one), and every round would run two
// batches: one nearly empty, one of the rest. So when fewer than half as
// many reports as the last batch ran are queued, the leader waits until
// that many are, for at most a quarter of the last batch's time (at most
// gatherMax): the time its callers need to send their next reports.
func (a *Allocator) gather(last int, took time.Duration) {
	if last < 4 {
		return
	}
	a.qmu.Lock()
	n, arrived := len(a.reports.pending), a.reports.arrived
	a.qmu.Unlock()
	if n >= last/2 || arrived == nil {
		return
	}
	timer := time.NewTimer(min(took/4, gatherMax))
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return
		case <-arrived:
		}
		a.qmu.Lock()
		n = len(a.reports.pending)
		a.qmu.Unlock()
		if n >= last {
			return
		}
	}
}

// gatherMax bounds the time a report batch waits to fill.
const gatherMax = 2 * time.Millisecond

// runReportBatch runs the claimable reports of batch in one transaction.
func (a *Allocator) runReportBatch(batch []*reportReq) {
	live := make([]*reportReq, 0, len(batch))
	for _, q := range batch {
		if !q.claim() {
			q.finish(nil, errAbandoned(q.ctx))
			continue
		}
		live = append(live, q)
	}
	defer func() {
		if v := recover(); v != nil {
			a.log.Error("panic in report batch", "panic", v)
			for _, q := range live {
				select {
				case <-q.done:
				default:
					q.finish(nil, fmt.Errorf("internal error ingesting a report"))
				}
			}
		}
	}()
	if len(live) == 0 {
		return
	}
	ctx, cancel := reportBatchContext(live)
	defer cancel()
	results := make([]*IngestResult, len(live))
	refusals := make([]error, len(live))
	items := make([]plainItem, len(live))
	for i, q := range live {
		items[i] = plainItem{ctx: q.ctx, r: q.r}
	}
	// On its own connection: the set-based path pipelines its reads on it.
	err := a.writeOnConn(ctx, func(t *tx) error {
		if a.testHookReportBatchFail != nil {
			if err := a.testHookReportBatchFail(len(live)); err != nil {
				return err
			}
		}
		pools, err := t.lockPools(PoolLoopbackV4, PoolLoopbackV6)
		if err != nil {
			return err
		}
		clear(results)
		clear(refusals)
		plain, rest, err := t.ingestPlain(pools, items)
		if err != nil {
			return err
		}
		for i, res := range plain {
			results[i] = res
		}
		if a.reportOrder != nil {
			var order []*report
			for i, q := range live {
				if plain[i] != nil {
					order = append(order, q.r)
				}
			}
			for _, i := range rest {
				order = append(order, live[i].r)
			}
			a.reportOrder(order, len(plain))
		}
		for _, i := range rest {
			q := live[i]
			// The events of the report before, named as it left things
			// (audit_names.go), and none pending that a rollback to the
			// savepoint could lose.
			if err := t.flushEvents(); err != nil {
				return err
			}
			sp := fmt.Sprintf("report%d", i)
			if err := t.SavePoint(sp).Error; err != nil {
				return err
			}
			t.ctx = q.ctx // its actor and request id in its audit events
			mark := len(t.changes)
			res, err := t.ingestReport(pools, q.r)
			if err == nil {
				results[i] = res
				continue
			}
			if _, final := fault.AsError(err); !final {
				return err // a database error: the whole batch runs again, one by one
			}
			if err := t.RollbackTo(sp).Error; err != nil {
				return err
			}
			t.changes = t.changes[:mark]
			t.dropEvents()
			refusals[i] = err
		}
		return nil
	})
	if err == nil {
		for i, q := range live {
			q.finish(results[i], refusals[i])
		}
		return
	}
	if len(live) > 1 {
		a.log.Warn("report batch failed; running its reports one transaction each", "size", len(live), "error", err)
	}
	for _, q := range live {
		a.reportClaimed(q)
	}
}

// reportClaimed runs a claimed report alone under its caller's context,
// as it would run without a queue (a deadline passing mid-transaction is
// 503, and a report is idempotent, so the caller retries).
func (a *Allocator) reportClaimed(q *reportReq) {
	res, err := a.reportAlone(q.ctx, q.r)
	q.finish(res, err)
}

// reportBatchContext is the context of a batch: the values of its first
// report, not cancelled by any one caller leaving, bounded by the latest
// deadline among the reports (none if one has none).
func reportBatchContext(reqs []*reportReq) (context.Context, context.CancelFunc) {
	base := context.WithoutCancel(reqs[0].ctx)
	var latest time.Time
	for _, q := range reqs {
		d, ok := q.ctx.Deadline()
		if !ok {
			return context.WithCancel(base)
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(base, latest)
}

// signal wakes ch's receiver without blocking (ch has capacity 1).
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
