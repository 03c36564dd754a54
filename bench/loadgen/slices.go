package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"
)

// slicer cuts a run into slices of size finished requests (in the order
// they finish, all clients together) and prints one SliceLine per slice:
// how a rate and latency move while the run goes on (e.g. as a site
// fills), without restarting the clients between measurements. A nil
// slicer does nothing.
type slicer struct {
	size  int
	label string
	w     io.Writer
	cpu   *cpuMeter

	mu    sync.Mutex
	index int
	from  int64     // requests finished before this slice
	start time.Time // end of the previous slice (or of the run's start)
	n, ok int64
	lat   []time.Duration // 2xx latencies of this slice
	cpu0  map[string]float64
}

// SliceLine is the JSON line of one slice. PerSecond counts 2xx answers
// per second of the slice's wall time (from the end of the previous
// slice to the last finish of this one).
type SliceLine struct {
	Label     string  `json:"label,omitempty"`
	Slice     int     `json:"slice"`
	From      int64   `json:"from_request"`
	Requests  int64   `json:"requests"`
	OK        int64   `json:"ok"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
	P50ms     float64 `json:"p50_ms"`
	P90ms     float64 `json:"p90_ms"`
	P99ms     float64 `json:"p99_ms"`
	Maxms     float64 `json:"max_ms"`
	// CPUms is the CPU time each process of -cpu spent during the slice.
	CPUms map[string]float64 `json:"cpu_ms,omitempty"`
}

func (s *slicer) begin(t time.Time) {
	if s != nil {
		s.start = t
		s.cpu0 = s.cpu.read()
	}
}

// add records one finished attempt and prints the slice it completes.
func (s *slicer) add(res result) {
	if s == nil {
		return
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	if res.status >= 200 && res.status < 300 {
		s.ok++
		s.lat = append(s.lat, res.d)
	}
	if s.n == int64(s.size) {
		s.emit(now)
	}
}

// flush prints the last, partial slice (nothing when it is empty).
func (s *slicer) flush(t time.Time) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n > 0 {
		s.emit(t)
	}
}

func (s *slicer) emit(now time.Time) {
	sortDurations(s.lat)
	l := SliceLine{Label: s.label, Slice: s.index, From: s.from, Requests: s.n, OK: s.ok, Seconds: now.Sub(s.start).Seconds(),
		P50ms: percentile(s.lat, 0.50), P90ms: percentile(s.lat, 0.90), P99ms: percentile(s.lat, 0.99), Maxms: percentile(s.lat, 1)}
	if l.Seconds > 0 {
		l.PerSecond = float64(s.ok) / l.Seconds
	}
	cpu := s.cpu.read()
	l.CPUms, s.cpu0 = cpuSince(s.cpu0, cpu), cpu
	out, _ := json.Marshal(l)
	fmt.Fprintln(s.w, string(out))
	s.index++
	s.from += s.n
	s.start = now
	s.n, s.ok, s.lat = 0, 0, s.lat[:0]
}

func sortDurations(d []time.Duration) { sort.Slice(d, func(i, j int) bool { return d[i] < d[j] }) }

// percentile of sorted latencies in milliseconds (nearest rank; 0 when
// there are none, the maximum for p = 1).
func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.999999) - 1
	i = max(0, min(i, len(sorted)-1))
	return float64(sorted[i].Microseconds()) / 1000
}
