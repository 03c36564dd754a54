package helm_test

import (
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// The memory alert comes before the kernel's OOM kill: the chart renders
// GOMEMLIMIT from the container's memory limit, and IpledgerMemoryHigh
// (deploy/prometheus), evaluated by Prometheus's own engine on the series
// the server exports, fires for a process near that limit and stays quiet
// for one at its Go memory limit, where the collector holds a busy process.
func TestMemoryAlertFiresBeforeTheMemoryLimit(t *testing.T) {
	t.Parallel()
	expr := alertExpr(t, "IpledgerMemoryHigh")
	for _, tc := range []struct {
		values      string
		limit       int64 // the container's memory limit, bytes
		goMemLimit  string
		alertsAbove float64 // share of the limit from which the alert must fire
	}{
		{"", 512 << 20, "341MiB", 0.90}, // the chart's defaults
		{"resources: {limits: {memory: 1Gi}}", 1 << 30, "682MiB", 0.90},
		{"resources: {limits: {memory: 600M}}", 600e6, "381MiB", 0.90},
		{"resources: {limits: {memory: 512Mi}}\nsettings: {goMemLimit: 300MiB}", 512 << 20, "300MiB", 0.90},
	} {
		t.Run(fmt.Sprintf("%q", tc.values), func(t *testing.T) {
			m := decode(t, tc.values)
			c := m.deployment.Spec.Template.Spec.Containers[0]
			if got := c.Resources.Limits.Memory().Value(); got != tc.limit {
				t.Fatalf("memory limit %d, want %d", got, tc.limit)
			}
			gml := env(c)["GOMEMLIMIT"].Value
			if gml != tc.goMemLimit {
				t.Fatalf("GOMEMLIMIT %q, want %q", gml, tc.goMemLimit)
			}
			goLimit := goMemLimitBytes(t, gml)
			if fires(t, expr, float64(goLimit), goLimit) {
				t.Errorf("fires at the Go memory limit (%d bytes), where a busy server is expected", goLimit)
			}
			if near := tc.alertsAbove * float64(tc.limit); !fires(t, expr, near, goLimit) {
				t.Errorf("silent at %.0f bytes, %.0f%% of the container's limit %d: the OOM kill would come first",
					near, 100*tc.alertsAbove, tc.limit)
			}
		})
	}
	// A limit GOMEMLIMIT cannot be derived from is refused by name.
	if _, err := render(t, "resources: {limits: {memory: 1.5Gi}}"); err == nil || !strings.Contains(err.Error(), "settings.goMemLimit") {
		t.Errorf("memory limit 1.5Gi: %v, want a refusal naming settings.goMemLimit", err)
	}
	// Without a memory limit the chart leaves GOMEMLIMIT to the server.
	m := decode(t, "resources: {limits: {memory: null}}")
	if v, ok := env(m.deployment.Spec.Template.Spec.Containers[0])["GOMEMLIMIT"]; ok {
		t.Errorf("GOMEMLIMIT %q without a memory limit", v.Value)
	}
}

// importPeakMiB is the peak RSS of a server through the largest import
// measured, three replace-alls of 60,000 ExpectedMachines, with the
// GOMEMLIMIT the chart's default memory limit gives (docs/benchmarks.md,
// "Imports").
const importPeakMiB = 305

// The chart's default memory limit holds that import with room to spare
// (a quarter above its peak), so that a site's first import of its
// ExpectedMachines is not an OOM kill.
func TestDefaultMemoryLimitHoldsTheLargestImport(t *testing.T) {
	t.Parallel()
	c := decode(t, "").deployment.Spec.Template.Spec.Containers[0]
	limit := c.Resources.Limits.Memory().Value()
	if need := int64(importPeakMiB) << 20 * 5 / 4; limit < need {
		t.Errorf("default memory limit %d MiB, want at least %d MiB: a 60,000-record import peaks at %d MiB", limit>>20, need>>20, importPeakMiB)
	}
}

// alertExpr is the expression of the named alert of the rules file.
func alertExpr(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile("../prometheus/ipledger-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(data, false, model.LegacyValidation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == name {
				return r.Expr
			}
		}
	}
	t.Fatalf("no alert %s", name)
	return ""
}

// fires evaluates expr with Prometheus's engine at the end of 20 minutes
// of a process holding rss bytes with the Go memory limit goLimit, as the
// server exports them.
func fires(t *testing.T, expr string, rss float64, goLimit int64) bool {
	t.Helper()
	target := []string{"job", "site-ipledger", "instance", "10.0.0.7:8080"}
	series := []storage.Series{
		constSeries(labels.FromStrings(append([]string{"__name__", "process_resident_memory_bytes"}, target...)...), rss),
		constSeries(labels.FromStrings(append([]string{"__name__", "go_gc_gomemlimit_bytes"}, target...)...), float64(goLimit)),
	}
	st := &storage.MockQueryable{MockQuerier: &storage.MockQuerier{
		SelectMockFunction: func(_ bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
			var out []storage.Series
		next:
			for _, s := range series {
				for _, m := range ms {
					if !m.Matches(s.Labels().Get(m.Name)) {
						continue next
					}
				}
				out = append(out, s)
			}
			return &listSeriesSet{list: out, i: -1}
		},
	}}
	eng := promql.NewEngine(promql.EngineOpts{MaxSamples: 10000, Timeout: 10 * time.Second, LookbackDelta: 5 * time.Minute})
	q, err := eng.NewInstantQuery(t.Context(), st, nil, expr, time.UnixMilli(20*60*1000))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	res := q.Exec(t.Context())
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	v, ok := res.Value.(promql.Vector)
	if !ok {
		t.Fatalf("%s: %T, want a vector", expr, res.Value)
	}
	return len(v) > 0
}

// constSeries is a scrape of v every minute for 20 minutes.
func constSeries(l labels.Labels, v float64) storage.Series {
	var samples []chunks.Sample
	for ts := int64(0); ts <= 20*60*1000; ts += 60 * 1000 {
		samples = append(samples, sample{ts, v})
	}
	return storage.NewListSeries(l, samples)
}

type sample struct {
	t int64
	f float64
}

func (s sample) T() int64                      { return s.t }
func (s sample) ST() int64                     { return 0 }
func (s sample) F() float64                    { return s.f }
func (s sample) H() *histogram.Histogram       { return nil }
func (s sample) FH() *histogram.FloatHistogram { return nil }
func (s sample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s sample) Copy() chunks.Sample           { return s }

type listSeriesSet struct {
	list []storage.Series
	i    int
}

func (s *listSeriesSet) Next() bool                        { s.i++; return s.i < len(s.list) }
func (s *listSeriesSet) At() storage.Series                { return s.list[s.i] }
func (s *listSeriesSet) Err() error                        { return nil }
func (s *listSeriesSet) Warnings() annotations.Annotations { return nil }

// goMemLimitBytes reads GOMEMLIMIT as the Go runtime does (a number of
// bytes with an optional B, KiB, MiB, GiB or TiB).
func goMemLimitBytes(t *testing.T, s string) int64 {
	t.Helper()
	m := regexp.MustCompile(`^([0-9]+)(B|KiB|MiB|GiB|TiB)?$`).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("GOMEMLIMIT %q is not a byte count", s)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	shift := map[string]uint{"": 0, "B": 0, "KiB": 10, "MiB": 20, "GiB": 30, "TiB": 40}[m[2]]
	return n << shift
}
