package main

import (
	"bytes"
	"encoding/json"
	"io"
)

// Every `--output json` of the CLI prints one JSON document on one line
// (compact, ending in a newline), objects and lists alike; a command that
// follows a stream (`cni-ipam watch`) prints one such line per document.
// Scripts read it with any JSON parser or line by line; `| jq .` indents
// it for people (README.md, "CLI").

// printJSON writes the JSON document raw on one line.
func printJSON(w io.Writer, raw []byte) error {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// writeJSON writes v as JSON on one line.
func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return printJSON(w, b)
}
