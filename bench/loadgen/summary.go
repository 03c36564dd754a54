package main

import (
	"fmt"
	"sort"
	"time"
)

// Summary is the JSON line loadgen prints.
type Summary struct {
	Label        string             `json:"label,omitempty"`
	Mode         string             `json:"mode"`
	Servers      int                `json:"servers"`
	Clients      int                `json:"clients"`
	Pools        int                `json:"pools,omitempty"`
	Requests     int64              `json:"requests"`
	OK           int64              `json:"ok"`
	Seconds      float64            `json:"seconds"`
	PerSecond    float64            `json:"per_second"`
	P50ms        float64            `json:"p50_ms"`
	P90ms        float64            `json:"p90_ms"`
	P99ms        float64            `json:"p99_ms"`
	Maxms        float64            `json:"max_ms"`
	Status       map[string]int64   `json:"status"`
	Codes        map[string]int64   `json:"codes,omitempty"`
	Transport    int64              `json:"transport_errors"`
	Hangs        int64              `json:"hangs"`
	Retries      int64              `json:"retries"`
	Violations   []string           `json:"violations,omitempty"`
	FirstErrors  []string           `json:"first_errors,omitempty"`
	PagesWalked  int64              `json:"pages_walked,omitempty"`
	ItemsWalked  int64              `json:"items_walked,omitempty"`
	Acknowledged int64              `json:"acknowledged,omitempty"`
	Incomplete   int64              `json:"incomplete,omitempty"`
	CPUms        map[string]float64 `json:"cpu_ms,omitempty"`
}

func (r *runner) summarize(results [][]result, elapsed time.Duration) *Summary {
	s := &Summary{Label: r.c.label, Mode: r.c.mode, Servers: len(r.c.servers), Clients: r.c.clients,
		Status: map[string]int64{}, Codes: map[string]int64{}, Seconds: elapsed.Seconds(),
		Retries: r.retries.Load(), PagesWalked: r.pages.Load(), ItemsWalked: r.items.Load(), Acknowledged: r.ackN}
	if r.c.mode == "allocate" {
		s.Pools = len(r.c.pools)
	}
	var lat []time.Duration
	for _, rs := range results {
		for _, x := range rs {
			s.Requests++
			if x.status == 0 {
				s.Transport++
				if x.hang {
					s.Hangs++
				}
				continue
			}
			s.Status[fmt.Sprint(x.status)]++
			if x.code != "" {
				s.Codes[x.code]++
			}
			if x.status >= 200 && x.status < 300 {
				s.OK++
				lat = append(lat, x.d)
			}
		}
	}
	sortDurations(lat)
	s.P50ms, s.P90ms, s.P99ms, s.Maxms = percentile(lat, 0.50), percentile(lat, 0.90), percentile(lat, 0.99), percentile(lat, 1)
	s.Incomplete = r.incomplete.Load()
	if elapsed > 0 {
		s.PerSecond = float64(s.OK) / elapsed.Seconds()
	}
	// Violations.
	for st, n := range s.Status {
		switch {
		case st == "503":
			if !r.c.allowUnavailable {
				s.Violations = append(s.Violations, fmt.Sprintf("%d answers 503 unavailable", n))
			}
		case st < "200" || (st >= "300" && st < "400"):
			s.Violations = append(s.Violations, fmt.Sprintf("%d answers %s (unexpected status)", n, st))
		case st >= "500":
			s.Violations = append(s.Violations, fmt.Sprintf("%d answers %s (only 503 unavailable is acceptable)", n, st))
		case st >= "400" && !r.c.allow4xx:
			s.Violations = append(s.Violations, fmt.Sprintf("%d answers %s", n, st))
		}
	}
	if s.Hangs > 0 {
		s.Violations = append(s.Violations, fmt.Sprintf("%d requests got no answer within %s (hang)", s.Hangs, r.c.timeout))
	}
	if s.Transport-s.Hangs > 0 && !r.c.allowUnavailable {
		s.Violations = append(s.Violations, fmt.Sprintf("%d transport errors", s.Transport-s.Hangs))
	}
	if s.OK == 0 {
		s.Violations = append(s.Violations, "no request succeeded")
	}
	r.errMu.Lock()
	s.FirstErrors = append(s.FirstErrors, r.errs...)
	s.Violations = append(s.Violations, r.violations...)
	if r.moreViolations > 0 {
		s.Violations = append(s.Violations, fmt.Sprintf("VIOLATION … and %d more like these", r.moreViolations))
	}
	r.errMu.Unlock()
	sort.Strings(s.Violations)
	return s
}
