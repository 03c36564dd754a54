package auth

import (
	"strings"
	"testing"

	"github.com/ipledger/ipledger/kernel"
)

// wantCode fails the test unless err is a *kernel.Error with this code
// whose message mentions each of msgs.
func wantCode(t *testing.T, err error, code kernel.Code, msgs ...string) *kernel.Error {
	t.Helper()
	e, ok := kernel.AsError(err)
	if !ok {
		t.Fatalf("want %s error, got %v", code, err)
	}
	if e.Code != code {
		t.Fatalf("want code %s, got %s (%s)", code, e.Code, e.Message)
	}
	for _, m := range msgs {
		if !strings.Contains(e.Message, m) {
			t.Fatalf("error %q does not mention %q", e.Message, m)
		}
	}
	return e
}
