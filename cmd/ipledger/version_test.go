package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/buildinfo"
)

func TestVersionJSON(t *testing.T) {
	t.Parallel()
	out, err := runCmd(t, "version", "--output", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("version --output json printed %q: %v", out, err)
	}
	in := buildinfo.Get()
	want := map[string]string{"version": in.Version, "commit": in.Commit, "date": in.Date, "go_version": in.GoVersion}
	if len(got) != len(want) {
		t.Fatalf("version --output json = %v, want the keys of %v", got, want)
	}
	for k, v := range want {
		if got[k] != v || v == "" {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

func TestVersionTable(t *testing.T) {
	t.Parallel()
	out, err := runCmd(t, "version")
	if err != nil {
		t.Fatal(err)
	}
	in := buildinfo.Get()
	for _, line := range []string{"version  " + in.Version, "commit   " + in.Commit, "built    " + in.Date, "go       " + in.GoVersion} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("version printed %q, want a line %q", out, line)
		}
	}
	if _, err := runCmd(t, "version", "--output", "yaml"); err == nil || !strings.Contains(err.Error(), `--output "yaml"`) {
		t.Errorf("version --output yaml: err = %v, want a refusal naming the value", err)
	}
}

// The CLI's requests say which build sent them.
func TestCLIUserAgent(t *testing.T) {
	t.Parallel()
	uas := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uas <- r.Header.Get("User-Agent")
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"items":[]}`))
	}))
	defer srv.Close()
	cf := &clientFlags{server: srv.URL, token: "t", output: "json"}
	c, err := cf.client(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var raw json.RawMessage
	if _, err := c.call(http.MethodGet, "/api/v1/pools", nil, "", nil, &raw); err != nil {
		t.Fatal(err)
	}
	ua := <-uas
	if want := buildinfo.UserAgent("ipledger-cli"); ua != want {
		t.Fatalf("User-Agent = %q, want %q", ua, want)
	}
	if !strings.HasPrefix(ua, "ipledger-cli/"+buildinfo.Get().Version+" ") {
		t.Fatalf("User-Agent %q does not carry the version", ua)
	}
}
