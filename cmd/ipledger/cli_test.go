package main

import (
	"io"
	"os"
	"strings"
	"testing"
)

// runCLI runs the ipledger command with args against the API at srvURL,
// feeding stdin, and returns what it printed on stdout. The CLI prints to
// os.Stdout, which runCLI swaps: tests that use it do not run in parallel.
func runCLI(t *testing.T, srvURL, token, stdin string, args ...string) (string, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	cmd := newRootCmd()
	cmd.SetArgs(append([]string{"--server", srvURL, "--token", token}, args...))
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetErr(io.Discard)
	err = cmd.Execute()
	w.Close()
	os.Stdout = old
	return <-done, err
}
