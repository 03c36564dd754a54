package views

import (
	"testing"

	"github.com/ipledger/ipledger/allocator"
)

// TestLoopbackExamples: the form's placeholders are the first value of the
// first explicit range of lo-ip and lo-ip-v6 (ranges come ordered by
// their first value), and a neutral documentation address when the pool
// is missing or has automatic ranges only.
func TestLoopbackExamples(t *testing.T) {
	t.Parallel()
	v4 := &allocator.Pool{Name: "lo-ip", Ranges: []allocator.Range{
		{First: "10.50.0.1", Last: "10.50.0.199", AutoAssign: true},
		{First: "10.50.0.200", Last: "10.50.0.249"},
		{First: "10.50.1.0", Last: "10.50.1.9"},
	}}
	autoOnly := &allocator.Pool{Name: "lo-ip-v6", Ranges: []allocator.Range{{First: "fd50::1", Last: "fd50::ff", AutoAssign: true}}}
	for _, c := range []struct {
		name      string
		v4, v6    *allocator.Pool
		want4, w6 string
	}{
		{"explicit ranges", v4, &allocator.Pool{Ranges: []allocator.Range{{First: "fd50:0:0:1::10", Last: "fd50:0:0:1::ff"}}}, "10.50.0.200", "fd50:0:0:1::10"},
		{"no pools", nil, nil, "192.0.2.10", "2001:db8::10"},
		{"automatic ranges only", &allocator.Pool{Ranges: autoOnly.Ranges}, autoOnly, "192.0.2.10", "2001:db8::10"},
	} {
		got := NewLoopbackExamples(c.v4, c.v6)
		if got.IPv4 != c.want4 || got.IPv6 != c.w6 {
			t.Errorf("%s: examples %+v, want %s and %s", c.name, got, c.want4, c.w6)
		}
	}
	if got := (LoopbackExamples{}).OrNeutral(); got.IPv4 != "192.0.2.10" || got.IPv6 != "2001:db8::10" {
		t.Errorf("empty examples fill to %+v", got)
	}
}
