package views

import (
	"context"
	"strings"
	"testing"
)

// Counts get a thousands separator, however long; short counts and
// anything that is not a decimal integer are left as they are.
func TestCountSeparatesThousands(t *testing.T) {
	for in, want := range map[string]string{
		"0": "0", "999": "999", "1000": "1,000", "65536": "65,536", "1234567": "1,234,567",
		"-1234": "-1,234", "18446744073709551616": "18,446,744,073,709,551,616",
		"340282366920938463463374607431768211456": "340,282,366,920,938,463,463,374,607,431,768,211,456",
		"": "", "10.180.62.1": "10.180.62.1", "1.84e+19": "1.84e+19", "12a4": "12a4", "-": "-",
	} {
		if got := Count(in); got != want {
			t.Errorf("Count(%q) = %q, want %q", in, got, want)
		}
	}
	if got := CountInt(int64(4096)); got != "4,096" {
		t.Errorf("CountInt(4096) = %q", got)
	}
	if got := Short("1234567"); got != "1,234,567" {
		t.Errorf("Short of a 7-digit count = %q, want it with separators", got)
	}
}

// A sortable column showing a count with separators sorts on the raw
// number (data-sort-value): app.js's parseFloat reads "1,234" as 1.
func TestPoolsPageSortsRangesOnTheRawNumber(t *testing.T) {
	var b strings.Builder
	v := PoolsView{Page: Page{Title: "Pools", Nav: "pools", User: "token:admin"},
		Pools: []PoolBar{{Name: "lo-ip", Type: "ipv4", Size: "65536", Free: "65536", Ranges: 1234, Reserved: "0", Quar: "0"}}}
	if err := PoolsPage(v).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if html := b.String(); !strings.Contains(html, `data-sort-value="1234">1,234<`) {
		t.Errorf("the Ranges cell of 1234 ranges lacks data-sort-value=\"1234\":\n%s", html)
	}
}
