package handlers

import (
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
)

// A limit above 1000 is 1000 however many digits it has, and what is not
// a positive integer is refused.
func TestLimit(t *testing.T) {
	t.Parallel()
	e := echo.New()
	for q, want := range map[string]int{
		"":                                100,
		"?limit=7":                        7,
		"?limit=1000":                     1000,
		"?limit=100000000000":             1000,
		"?limit=99999999999999999999999":  1000,
		"?limit=0":                        -1,
		"?limit=-1":                       -1,
		"?limit=+5":                       -1,
		"?limit=":                         -1,
		"?limit=-99999999999999999999999": -1,
		"?limit=abc":                      -1,
	} {
		c := e.NewContext(httptest.NewRequest("GET", "/api/v1/pools"+q, nil), httptest.NewRecorder())
		n, err := Limit(c)
		switch {
		case want < 0 && err == nil:
			t.Errorf("%q: limit %d, want an error", q, n)
		case want >= 0 && (err != nil || n != want):
			t.Errorf("%q: limit %d, %v; want %d", q, n, err, want)
		}
	}
}
