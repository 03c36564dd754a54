package handlers

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

// An after too large for a revision is refused as too large, not as "not
// an integer ≥ 0", which it is; a negative one keeps its message.
func TestFeedQueryAfterOutOfRange(t *testing.T) {
	t.Parallel()
	e := echo.New()
	for q, want := range map[string]string{
		"99999999999999999999":  "larger than any revision (at most 9223372036854775807)",
		"9223372036854775808":   "larger than any revision",
		"-99999999999999999999": "must be a revision",
		"-1":                    "must be a revision",
	} {
		c := e.NewContext(httptest.NewRequest("GET", "/api/v1/events?after="+q, nil), httptest.NewRecorder())
		if _, err := feedQuery(c); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("after=%s: %v, want an error containing %q", q, err, want)
		}
	}
	c := e.NewContext(httptest.NewRequest("GET", "/api/v1/events?after=9223372036854775807", nil), httptest.NewRecorder())
	if q, err := feedQuery(c); err != nil || q.After != 9223372036854775807 {
		t.Errorf("after=MaxInt64: %+v, %v", q, err)
	}
}
