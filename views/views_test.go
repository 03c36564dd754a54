package views

import (
	"strings"
	"testing"
	"time"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/console"
)

func TestPoolBarSegmentsAndHotThreshold(t *testing.T) {
	p := allocator.Pool{Name: "lo-ip", Type: "ipv4", Stats: allocator.PoolStats{
		Auto:     allocator.Counts{Size: "80", Allocated: "60", Free: "19", Quarantined: "1", Reserved: "0"},
		Explicit: allocator.Counts{Size: "20", Allocated: "10", Free: "5", Quarantined: "0", Reserved: "5"},
	}}
	b := NewPoolBar(p)
	want := map[string]float64{"auto": 60, "explicit": 10, "reserved": 5, "quarantined": 1}
	for _, s := range b.Segs {
		if s.Pct != want[s.Class] {
			t.Errorf("segment %s = %.2f%%, want %.0f%%", s.Class, s.Pct, want[s.Class])
		}
	}
	if b.Size != "100" || b.Free != "24" || b.UsedText() != "76.0%" || b.Hot {
		t.Fatalf("bar %+v used %s", b, b.UsedText())
	}
	p.Stats.Auto.Free = "10"
	p.Stats.Auto.Allocated = "69"
	if b := NewPoolBar(p); !b.Hot {
		t.Fatalf("85 %% used is not hot: %s", b.UsedText())
	}
	// A /64 that holds a few values never reads 0 %.
	huge := allocator.Pool{Stats: allocator.PoolStats{Auto: allocator.Counts{Size: "18446744073709551616", Allocated: "3",
		Free: "18446744073709551613", Quarantined: "0", Reserved: "0"}, Explicit: allocator.Counts{Size: "0", Allocated: "0", Free: "0", Quarantined: "0", Reserved: "0"}}}
	if got := NewPoolBar(huge).UsedText(); got != "<0.1%" {
		t.Fatalf("huge pool used %q", got)
	}
	if Short("18446744073709551616") != "1.84e+19" {
		t.Fatalf("Short = %s", Short("18446744073709551616"))
	}
}

func TestUsageChartGeometry(t *testing.T) {
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var pts []console.UsagePoint
	for i := 0; i < 30; i++ {
		pts = append(pts, console.UsagePoint{Day: day.AddDate(0, 0, i), Allocated: int64(2 * i), Quarantined: int64(i % 2)})
	}
	c := NewUsageChart(pts, "255")
	if c.Max != 100 {
		t.Fatalf("y max %d, want 100 (nice ceiling of 59)", c.Max)
	}
	if !strings.HasPrefix(c.AreaPath(), "M44.0,146.0 L44.0,146.0") || !strings.HasSuffix(c.AreaPath(), "Z") {
		t.Fatalf("area path %s", c.AreaPath())
	}
	if n := len(strings.Fields(c.AllocLine())); n != 30 {
		t.Fatalf("%d points in the line", n)
	}
	if !c.HasQuarantine() {
		t.Fatal("quarantine line missing")
	}
	if s := c.Summary(); !strings.HasPrefix(s, "+59 values in use over 30 days (2.0 a day); 59 in use now of 255") {
		t.Fatalf("summary %q", s)
	}
}

func TestEMFormErrorPlacement(t *testing.T) {
	f := EMForm{DPUs: []DPURow{{Key: "a", Serial: "A"}, {Key: "b", IPv6: "::1"}}}
	for field, id := range map[string]string{
		"bmc_mac_address":                 "err-bmc_mac_address",
		"metadata.name":                   "err-metadata-name",
		"metadata.labels[2].key":          "err-metadata-labels",
		"fallback_dpu_serial_numbers[0]":  "err-fallback_dpu_serial_numbers",
		"expected_dpus[1].loopback_ip_v6": "err-dpu-b-loopback_ip_v6",
		"expected_dpus[0]":                "err-dpu-a-serial_number",
		"expected_dpus[7].loopback_ip":    "err-form",
		"something_else":                  "err-form",
	} {
		if got := f.EMErrorID(field); got != id {
			t.Errorf("EMErrorID(%q) = %q, want %q", field, got, id)
		}
	}
	spec := EMForm{MAC: "x", Labels: "env=prod\n\nrole", Fallback: "A, B C", DPUs: []DPURow{{Serial: "S", IP: "10.0.0.1"}}}.Spec("")
	if spec.BmcPassword != nil || len(*spec.ExpectedDPUs) != 1 || (*spec.ExpectedDPUs)[0].LoopbackIPv6 != nil ||
		len(spec.Metadata.Labels) != 2 || spec.Metadata.Labels[1].Key != "role" || len(spec.FallbackDPUSerialNumbers) != 3 {
		t.Fatalf("spec %+v", spec)
	}
	if empty := (EMForm{}).Spec(""); empty.ExpectedDPUs == nil || len(*empty.ExpectedDPUs) != 0 {
		t.Fatal("a form without rows must clear the list, not keep it")
	}
}

// TestEMFormSkipsEmptyDPURows: an untouched row is left out of the spec and
// the allocator's expected_dpus[i] still points at the right form row.
func TestEMFormSkipsEmptyDPURows(t *testing.T) {
	f := EMForm{MAC: "x", DPUs: []DPURow{{Key: "e"}, {Key: "s", Serial: "S1"}, {Key: "e2", IP: "  "}, {Key: "i", IP: "10.0.0.1"}}}
	spec := f.Spec("")
	if n := len(*spec.ExpectedDPUs); n != 2 || (*spec.ExpectedDPUs)[0].SerialNumber != "S1" || (*spec.ExpectedDPUs)[1].LoopbackIP == nil {
		t.Fatalf("spec DPUs %+v, want the two filled rows", *spec.ExpectedDPUs)
	}
	for field, id := range map[string]string{
		"expected_dpus[0].serial_number": "err-dpu-s-serial_number",
		"expected_dpus[1].serial_number": "err-dpu-i-serial_number",
		"expected_dpus[2].loopback_ip":   "err-form",
	} {
		if got := f.EMErrorID(field); got != id {
			t.Errorf("EMErrorID(%q) = %q, want %q", field, got, id)
		}
	}
}
