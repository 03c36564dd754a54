package web

import "testing"

// The requests that carry a whole file of work get the bulk deadline;
// every other API request keeps the ordinary one.
func TestIsBulk(t *testing.T) {
	for _, c := range []struct {
		method, path string
		want         bool
	}{
		{"PUT", "/api/v1/expected-machines", true},
		{"PUT", "/api/v1/expected-machines/", true},
		{"POST", "/api/v1/pools/lo-ip/allocations:batch", true},
		{"GET", "/api/v1/expected-machines", false},
		{"PUT", "/api/v1/expected-machines/0a:00:00:00:00:01", false},
		{"POST", "/api/v1/pools/lo-ip/allocations", false},
		{"POST", "/api/v1/expected-machines", false},
	} {
		if got := isBulk(c.method, c.path); got != c.want {
			t.Errorf("isBulk(%s %s) = %t, want %t", c.method, c.path, got, c.want)
		}
	}
}
