package main

import (
	"os"
	"runtime"
	"strings"
	"testing"
)

// A dynamically linked binary is refused for its interpreter, whatever
// else it is: the check does not depend on file(1).
func TestCheckBinaryRefusesADynamicBinary(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("reads a Linux system binary")
	}
	const dynamic = "/bin/sh"
	if _, err := os.Stat(dynamic); err != nil {
		t.Skipf("no %s: %v", dynamic, err)
	}
	_, err := checkBinary(dynamic, "ipledger", runtime.GOARCH, "v1.2.0")
	if err == nil || !strings.Contains(err.Error(), "not static") {
		t.Fatalf("checkBinary(%s): %v, want a refusal saying it is not static", dynamic, err)
	}
}
