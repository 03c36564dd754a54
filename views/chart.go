package views

import (
	"fmt"
	"strings"

	"github.com/ipledger/ipledger/console"
)

// UsageChart is the server-rendered SVG of a pool's values in use over the
// last days (allocated, and allocated + quarantined as the filled area), so
// an operator sees how fast the pool is filling.
type UsageChart struct {
	Points []console.UsagePoint
	// Geometry in SVG user units.
	W, H, PadL, PadR, PadT, PadB float64
	Max                          int64
	Size                         string
}

// NewUsageChart lays out the points; size is the pool's size (decimal text)
// for the summary line.
func NewUsageChart(points []console.UsagePoint, size string) UsageChart {
	c := UsageChart{Points: points, W: 640, H: 170, PadL: 44, PadR: 10, PadT: 10, PadB: 24, Size: size}
	for _, p := range points {
		if n := p.Allocated + p.Quarantined; n > c.Max {
			c.Max = n
		}
	}
	c.Max = niceCeil(c.Max)
	return c
}

func niceCeil(n int64) int64 {
	if n <= 4 {
		return 4
	}
	step := int64(1)
	for step*10 <= n {
		step *= 10
	}
	for _, m := range []int64{1, 2, 5, 10} {
		if step*m >= n {
			return step * m
		}
	}
	return n
}

func (c UsageChart) x(i int) float64 {
	if len(c.Points) < 2 {
		return c.PadL
	}
	return c.PadL + (c.W-c.PadL-c.PadR)*float64(i)/float64(len(c.Points)-1)
}

func (c UsageChart) y(n int64) float64 {
	return c.PadT + (c.H-c.PadT-c.PadB)*(1-float64(n)/float64(c.Max))
}

// ViewBox is the SVG viewBox.
func (c UsageChart) ViewBox() string { return fmt.Sprintf("0 0 %.0f %.0f", c.W, c.H) }

// AreaPath is the filled area of values in use (allocated + quarantined).
func (c UsageChart) AreaPath() string {
	if len(c.Points) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "M%.1f,%.1f", c.x(0), c.y(0))
	for i, p := range c.Points {
		fmt.Fprintf(&b, " L%.1f,%.1f", c.x(i), c.y(p.Allocated+p.Quarantined))
	}
	fmt.Fprintf(&b, " L%.1f,%.1f Z", c.x(len(c.Points)-1), c.y(0))
	return b.String()
}

// AllocLine is the polyline of allocated values.
func (c UsageChart) AllocLine() string {
	var parts []string
	for i, p := range c.Points {
		parts = append(parts, fmt.Sprintf("%.1f,%.1f", c.x(i), c.y(p.Allocated)))
	}
	return strings.Join(parts, " ")
}

// QuarLine is the polyline of quarantined values (shown when any).
func (c UsageChart) QuarLine() string {
	var parts []string
	for i, p := range c.Points {
		parts = append(parts, fmt.Sprintf("%.1f,%.1f", c.x(i), c.y(p.Quarantined)))
	}
	return strings.Join(parts, " ")
}

// HasQuarantine reports whether any day had quarantined values.
func (c UsageChart) HasQuarantine() bool {
	for _, p := range c.Points {
		if p.Quarantined > 0 {
			return true
		}
	}
	return false
}

// GridYs are the y positions and labels of the horizontal grid lines.
func (c UsageChart) GridYs() []GridLine {
	var out []GridLine
	for _, f := range []int64{0, 2, 4} {
		n := c.Max * f / 4
		out = append(out, GridLine{Y: fmt.Sprintf("%.1f", c.y(n)), LabelY: fmt.Sprintf("%.1f", c.y(n)+4), Label: fmt.Sprint(n)})
	}
	return out
}

// GridLine is one horizontal grid line of the chart.
type GridLine struct{ Y, LabelY, Label string }

// Num formats a coordinate.
func Num(f float64) string { return fmt.Sprintf("%.1f", f) }

// FirstDay and LastDay label the x axis.
func (c UsageChart) FirstDay() string {
	if len(c.Points) == 0 {
		return ""
	}
	return c.Points[0].Day.Format("Jan 2")
}

// LastDay labels the right end (today).
func (c UsageChart) LastDay() string {
	if len(c.Points) == 0 {
		return ""
	}
	return "today"
}

// Summary says how the pool moved over the period, e.g. "+42 values in use
// over 30 days (1.4 a day)".
func (c UsageChart) Summary() string {
	if len(c.Points) == 0 {
		return ""
	}
	first, last := c.Points[0], c.Points[len(c.Points)-1]
	d := (last.Allocated + last.Quarantined) - (first.Allocated + first.Quarantined)
	days := len(c.Points) - 1
	if days < 1 {
		days = 1
	}
	return fmt.Sprintf("%+d values in use over %d days (%.1f a day); %d in use now of %s", d, len(c.Points), float64(d)/float64(days),
		last.Allocated+last.Quarantined, Short(c.Size))
}

// Label is the chart's accessible description.
func (c UsageChart) Label() string { return "Values in use over the last days: " + c.Summary() }
