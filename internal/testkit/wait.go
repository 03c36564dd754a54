package testkit

import (
	"testing"
	"time"
)

// WaitFor polls cond every 5 ms until it holds, and fails t naming what
// when it still does not after timeout.
func WaitFor(t testing.TB, timeout time.Duration, cond func() bool, what string) {
	t.Helper()
	for end := time.Now().Add(timeout); ; time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
	}
}
