package prometheus_test

import (
	"log/slog"
	"os"
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

// IpledgerStorageFull, evaluated by Prometheus's own engine on the two
// series the server exports (ipledger_storage_full and
// ipledger_storage_refused_writes_total, one scrape a minute), fires
// while the storage is full, when writes were refused in the last five
// minutes even if the gauge was back to 0 at every scrape, and for a
// server that is not ready and so gets no writes; it is quiet for a
// server whose storage has taken writes for five minutes, whatever it
// refused before.
func TestStorageFullAlert(t *testing.T) {
	t.Parallel()
	expr := alertExpr(t, "IpledgerStorageFull")
	for _, tc := range []struct {
		name          string
		full, refused []float64 // one scrape a minute, the last one now
		fires         bool
	}{
		{"never full", []float64{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, []float64{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, false},
		{"full now", []float64{0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, []float64{0, 0, 0, 0, 0, 0, 0, 0, 3, 9}, true},
		{"full, no writes arriving", []float64{0, 0, 0, 0, 1, 1, 1, 1, 1, 1}, []float64{0, 0, 0, 0, 1, 1, 1, 1, 1, 1}, true},
		{"refusing between scrapes", []float64{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, []float64{0, 0, 0, 0, 0, 0, 2, 4, 6, 8}, true},
		{"recovered a minute ago", []float64{0, 0, 0, 0, 0, 1, 1, 1, 1, 0}, []float64{0, 0, 0, 0, 0, 5, 9, 9, 9, 9}, true},
		{"recovered long ago", []float64{0, 1, 1, 0, 0, 0, 0, 0, 0, 0}, []float64{0, 7, 9, 9, 9, 9, 9, 9, 9, 9}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			target := []string{"job", "site-ipledger", "instance", "10.0.0.7:8080"}
			got := evaluate(t, expr, []storage.Series{
				series(labels.FromStrings(append([]string{"__name__", "ipledger_storage_full"}, target...)...), tc.full),
				series(labels.FromStrings(append([]string{"__name__", "ipledger_storage_refused_writes_total"}, target...)...), tc.refused),
			}, time.Duration(len(tc.full)-1)*time.Minute)
			if (len(got) > 0) != tc.fires {
				t.Errorf("fires %v (%v), want %v", len(got) > 0, got, tc.fires)
			}
			for _, s := range got {
				if s.Metric.Get("instance") != "10.0.0.7:8080" {
					t.Errorf("alert %v does not name the instance", s.Metric)
				}
			}
		})
	}
}

// alertExpr is the expression of the named alert of the rules file.
func alertExpr(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile("ipledger-rules.yaml")
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

// evaluate runs expr with Prometheus's engine at time at over the series.
func evaluate(t *testing.T, expr string, list []storage.Series, at time.Duration) promql.Vector {
	t.Helper()
	st := &storage.MockQueryable{MockQuerier: &storage.MockQuerier{
		SelectMockFunction: func(_ bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
			var out []storage.Series
		next:
			for _, s := range list {
				for _, m := range ms {
					if !m.Matches(s.Labels().Get(m.Name)) {
						continue next
					}
				}
				out = append(out, s)
			}
			return &seriesSet{list: out, i: -1}
		},
	}}
	eng := promql.NewEngine(promql.EngineOpts{MaxSamples: 10000, Timeout: 10 * time.Second, LookbackDelta: 5 * time.Minute})
	q, err := eng.NewInstantQuery(t.Context(), st, nil, expr, time.UnixMilli(at.Milliseconds()))
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
	return v
}

// series is a scrape a minute from time 0, of the values vs.
func series(l labels.Labels, vs []float64) storage.Series {
	samples := make([]chunks.Sample, len(vs))
	for i, v := range vs {
		samples[i] = sample{int64(i) * time.Minute.Milliseconds(), v}
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

type seriesSet struct {
	list []storage.Series
	i    int
}

func (s *seriesSet) Next() bool                        { s.i++; return s.i < len(s.list) }
func (s *seriesSet) At() storage.Series                { return s.list[s.i] }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }
