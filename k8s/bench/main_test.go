package bench

import (
	"flag"
	"os"
	"testing"

	"github.com/ipledger/ipledger/k8s/internal/testenv"
)

// TestMain starts the API server only for a benchmark run: `go test
// ./...` passes through this package without one.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		os.Exit(m.Run())
	}
	os.Exit(testenv.Main(m))
}
