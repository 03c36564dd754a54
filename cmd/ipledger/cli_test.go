package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// run runs `ipledger ARGS…` in-process with stdin as its input and returns
// what it printed on its standard output, and on its standard error too
// when withErr. Every command prints through the cobra command's writers,
// never to the process's, so the tests that run commands can be parallel.
func run(t *testing.T, stdin string, withErr bool, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := newRootCmd()
	cmd.SetArgs(args)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	if withErr {
		cmd.SetErr(&out)
	}
	err := cmd.Execute()
	return out.String(), err
}

// runCmd runs a command that needs no server (a database command, token,
// version) and returns what it printed on standard output and error.
func runCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return run(t, "", true, args...)
}

// runCLI runs a client command against the API at srvURL with token and
// returns what it printed on standard output.
func runCLI(t *testing.T, srvURL, token, stdin string, args ...string) (string, error) {
	t.Helper()
	return run(t, stdin, false, append([]string{"--server", srvURL, "--token", token}, args...)...)
}
