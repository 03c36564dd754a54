package testkit

import (
	"strings"
	"testing"

	"github.com/ipledger/ipledger/fault"
)

// WantCode fails t unless err is a *fault.Error with this code, whose
// field path is field (any field when field is ""), and whose message
// mentions each of msgs. It returns the error for further checks.
func WantCode(t testing.TB, err error, code fault.Code, field string, msgs ...string) *fault.Error {
	t.Helper()
	e, ok := fault.AsError(err)
	if !ok {
		t.Fatalf("want %s error, got %v", code, err)
	}
	if e.Code != code {
		t.Fatalf("want code %s, got %s (%s)", code, e.Code, e.Message)
	}
	if field != "" && e.Field != field {
		t.Fatalf("error %q: field %q, want %q", e.Message, e.Field, field)
	}
	for _, m := range msgs {
		if !strings.Contains(e.Message, m) {
			t.Fatalf("error %q does not mention %q", e.Message, m)
		}
	}
	return e
}

// IsCode reports whether err is a *fault.Error with this code.
func IsCode(err error, code fault.Code) bool {
	e, ok := fault.AsError(err)
	return ok && e.Code == code
}
