package main

import (
	"fmt"
	"io"
	"os"

	"github.com/ipledger/ipledger/apijson"
	"github.com/ipledger/ipledger/strictjson"
)

// readFileArg reads -f FILE (or - for stdin).
func readFileArg(name string) ([]byte, error) {
	if name == "" {
		return nil, fmt.Errorf("-f FILE is required")
	}
	if name == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(name)
}

// readJSONFile reads a JSON document given with -f (or - for stdin) and
// checks it with the rules the server applies to every body (docs/api.md
// "Strict bodies"): a repeated member name, or two names differing only
// in case, at any depth, is refused here naming the member's path, before
// anything is sent. A leading UTF-8 byte order mark is dropped.
func readJSONFile(name string) ([]byte, error) {
	data, err := readFileArg(name)
	if err != nil {
		return nil, err
	}
	data = strictjson.TrimBOM(data)
	what := name
	if name == "-" {
		what = "stdin"
	}
	if err := apijson.Check(data, apijson.Options{What: what}); err != nil {
		return nil, err
	}
	return data, nil
}
