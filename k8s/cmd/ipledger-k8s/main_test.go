package main

import (
	"io"
	"strings"
	"testing"
)

// The required settings are refused by name when missing or malformed,
// before anything connects.
func TestRequiredSettings(t *testing.T) {
	t.Setenv("IPLEDGER_URL", "")
	t.Setenv("IPLEDGER_TOKEN", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ipledger-url", "http://127.0.0.1:1"}, "--cluster-name is required"},
		{[]string{"--cluster-name", "a"}, "--ipledger-url"},
		{[]string{"--cluster-name", "Site_A", "--ipledger-url", "http://127.0.0.1:1"}, `--cluster-name "Site_A"`},
		{[]string{"--cluster-name", "a", "--ipledger-url", "http://127.0.0.1:1"}, "no credentials"},
		{[]string{"--cluster-name", "a", "--ipledger-url", "http://127.0.0.1:1", "--token-file", "/nonexistent"}, "--token-file"},
		{[]string{"--cluster-name", "a", "--ipledger-url", "http://127.0.0.1:1", "--log-level", "loud"}, "--log-level"},
		{[]string{"--cluster-name", "a", "stray"}, "unexpected argument"},
	} {
		err := run(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}
