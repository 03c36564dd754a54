package web

import (
	"context"
	"math/big"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/buildinfo"
	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/feed"
	"github.com/ipledger/ipledger/webhook"
)

// Metrics are the server's Prometheus metrics. The allocator's change and
// batch hooks feed some of them: build the allocator with
// Metrics.AllocatorOptions and give the same Metrics to New.
type Metrics = metrics

type metrics struct {
	reg      *prometheus.Registry
	duration *prometheus.HistogramVec
	changes  *prometheus.CounterVec
	batch    prometheus.Histogram
	batchDur prometheus.Histogram
}

// NewMetrics makes the server's metrics, registered in reg (a fresh
// registry when nil).
func NewMetrics(reg *prometheus.Registry) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &metrics{
		reg: reg,
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ipledger_http_request_duration_seconds",
			Help:    "HTTP request latency by method, route and status code.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"method", "route", "code"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ipledger_allocation_changes_total",
			Help: "Committed allocation changes by pool and action (allocate, release, quarantine, unquarantine, grow).",
		}, []string{"pool", "action"}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ipledger_allocation_batch_size",
			Help:    "Automatic allocations committed together in one transaction (group commit per pool).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
		}),
		batchDur: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ipledger_allocation_batch_duration_seconds",
			Help:    "Time one batch of automatic allocations spends in its transaction, pool lock wait included.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
	}
	in := buildinfo.Get()
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "ipledger_build_info",
		Help:        "The running build: always 1, the version, commit and Go version as labels.",
		ConstLabels: prometheus.Labels{"version": in.Version, "commit": in.Commit, "goversion": in.GoVersion},
	})
	build.Set(1)
	reg.MustRegister(m.duration, m.changes, m.batch, m.batchDur, build,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// AllocatorOptions returns o with the allocator's OnChange and OnGroupCommit
// hooks set to count into m.
func (m *Metrics) AllocatorOptions(o allocator.Options) allocator.Options {
	o.OnChange, o.OnGroupCommit = m.Count, m.Batch
	return o
}

// watch adds the per-pool gauges read from a at each scrape, a's fast-path
// counters, whether db's storage takes writes, and the
// change feed's and webhooks' metrics (metrics_feed.go).
func (m *metrics) watch(a *allocator.Allocator, db *gorm.DB, fd *feed.Feed, wh *webhook.Service) {
	guessHits := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "ipledger_allocation_batch_guess_hits_total",
		Help: "Batches of automatic allocations committed in one round trip on the leader's guess of the free values (PostgreSQL).",
	}, func() float64 { h, _ := a.GroupCommitGuesses(); return float64(h) })
	guessMisses := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "ipledger_allocation_batch_guess_misses_total",
		Help: "Guesses whose guard failed (nothing written; the batch then read the pool first).",
	}, func() float64 { _, m := a.GroupCommitGuesses(); return float64(m) })
	grouped := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "ipledger_allocation_batch_grouped_total",
		Help: "Guessed batches committed in one transaction with other pools' batches (PostgreSQL).",
	}, func() float64 { return float64(a.SharedGroupCommits()) })
	m.reg.MustRegister(&poolCollector{a: a}, guessHits, guessMisses, grouped)
	registerStorageMetrics(m.reg, database.StorageWatchOf(db))
	registerFeedMetrics(m.reg, fd, wh)
}

// registerStorageMetrics exports whether the database's storage takes
// writes (docs/operations.md "A full disk"): the IpledgerStorageFull
// alert reads them.
func registerStorageMetrics(reg prometheus.Registerer, w *database.StorageWatch) {
	full := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ipledger_storage_full",
		Help: "1 while the database's storage refuses writes (disk full or failing: every write is answered 503 and /readyz is not ready), else 0.",
	}, func() float64 {
		if f, _ := w.Full(); f {
			return 1
		}
		return 0
	})
	refused := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "ipledger_storage_refused_writes_total",
		Help: "Write transactions the database refused for lack of space (or a failing disk), each answered 503.",
	}, func() float64 { return float64(w.RefusedWrites()) })
	reg.MustRegister(full, refused)
}

// Count is the allocator's OnChange hook.
func (m *metrics) Count(pool, action string) { m.changes.WithLabelValues(pool, action).Inc() }

// Batch is the allocator's OnGroupCommit hook.
func (m *metrics) Batch(_ string, size int, took time.Duration) {
	m.batch.Observe(float64(size))
	m.batchDur.Observe(took.Seconds())
}

func (m *metrics) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		m.duration.WithLabelValues(c.Request().Method, route, strconv.Itoa(c.Response().Status)).Observe(time.Since(start).Seconds())
		return nil
	}
}

// poolCollector reads pool stats at scrape time.
type poolCollector struct{ a *allocator.Allocator }

var poolDesc = prometheus.NewDesc("ipledger_pool_values",
	"Values of a pool by range kind (auto, explicit) and state (size, allocated, free, quarantined, reserved).",
	[]string{"pool", "kind", "state"}, nil)

func (p *poolCollector) Describe(ch chan<- *prometheus.Desc) { ch <- poolDesc }

func (p *poolCollector) Collect(ch chan<- prometheus.Metric) {
	if p.a == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pools, err := p.a.ListPools(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(poolDesc, err)
		return
	}
	for _, pool := range pools {
		for kind, c := range map[string]allocator.Counts{"auto": pool.Stats.Auto, "explicit": pool.Stats.Explicit} {
			for state, v := range map[string]string{"size": c.Size, "allocated": c.Allocated, "free": c.Free,
				"quarantined": c.Quarantined, "reserved": c.Reserved} {
				f, _ := new(big.Float).SetString(v)
				x, _ := f.Float64()
				ch <- prometheus.MustNewConstMetric(poolDesc, prometheus.GaugeValue, x, pool.Name, kind, state)
			}
		}
	}
}
