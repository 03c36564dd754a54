package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestResolveStampedValuesWin(t *testing.T) {
	t.Parallel()
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.9.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "ffffffffffffffffffffffffffffffffffffffff"},
		{Key: "vcs.time", Value: "2026-01-01T00:00:00Z"},
	}}
	got := resolve("v1.2.0", "0123456789abcdef0123456789abcdef01234567", "2026-12-01T19:00:00Z", bi)
	want := Info{Version: "v1.2.0", Commit: "0123456789abcdef0123456789abcdef01234567", Date: "2026-12-01T19:00:00Z", GoVersion: "go1.26.8"}
	if got != want {
		t.Fatalf("resolve = %+v, want %+v", got, want)
	}
	if s := got.ShortCommit(); s != "0123456789ab" {
		t.Errorf("ShortCommit = %q", s)
	}
}

func TestResolveFromBuildInfo(t *testing.T) {
	t.Parallel()
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.9.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "ffffffffffffffffffffffffffffffffffffffff"},
		{Key: "vcs.time", Value: "2026-01-01T00:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	got := resolve("", "", "", bi)
	want := Info{Version: "v0.9.0", Commit: "ffffffffffffffffffffffffffffffffffffffff-dirty", Date: "2026-01-01T00:00:00Z", GoVersion: "go1.26.8"}
	if got != want {
		t.Fatalf("resolve = %+v, want %+v", got, want)
	}
	if s := got.ShortCommit(); s != "ffffffffffff-dirty" {
		t.Errorf("ShortCommit = %q", s)
	}
}

func TestResolveNothingKnown(t *testing.T) {
	t.Parallel()
	got := resolve("", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}})
	want := Info{Version: "dev", Commit: "unknown", Date: "unknown", GoVersion: runtime.Version()}
	if got != want {
		t.Fatalf("resolve = %+v, want %+v", got, want)
	}
	if got := resolve("", "", "", nil); got != want {
		t.Fatalf("resolve(nil) = %+v, want %+v", got, want)
	}
}

func TestUserAgent(t *testing.T) {
	t.Parallel()
	in := Get()
	ua := UserAgent("ipledger-cli")
	if want := "ipledger-cli/" + in.Version + " (commit " + in.ShortCommit() + ")"; ua != want {
		t.Fatalf("UserAgent = %q, want %q", ua, want)
	}
	if strings.ContainsAny(ua, "\r\n") {
		t.Fatalf("UserAgent %q has a line break", ua)
	}
}
