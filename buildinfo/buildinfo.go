// Package buildinfo says which build of ipledger is running: the version,
// commit and build date stamped by the release build (scripts/release.sh)
// with -ldflags -X, completed from the Go toolchain's own build
// information when a value was not stamped. It is a leaf: the server, the
// CLI and the webhook deliveries import it for `ipledger version`, the
// ipledger_build_info metric, the console footer and User-Agent headers.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
)

// Set by the release build:
//
//	-ldflags "-X github.com/ipledger/ipledger/buildinfo.version=v1.2.0
//	          -X github.com/ipledger/ipledger/buildinfo.commit=0123abc…
//	          -X github.com/ipledger/ipledger/buildinfo.date=2026-12-01T19:00:00Z"
var version, commit, date string

// Info is one build's identity, as `ipledger version --output json`
// prints it.
type Info struct {
	Version   string `json:"version"`    // "v1.2.0"; "dev" when neither stamped nor a module version
	Commit    string `json:"commit"`     // the git commit; "unknown" when the build recorded none
	Date      string `json:"date"`       // build date (RFC 3339); the commit's date when not stamped; "unknown" otherwise
	GoVersion string `json:"go_version"` // the Go toolchain that built it
}

var (
	once sync.Once
	info Info
)

// Get returns the running build's Info.
func Get() Info {
	once.Do(func() {
		bi, _ := debug.ReadBuildInfo()
		info = resolve(version, commit, date, bi)
	})
	return info
}

// resolve fills an Info from the stamped values, then from the Go build
// information: the module version (a `go install …@v1.2.0` build) and the
// vcs.revision, vcs.time and vcs.modified settings that `go build` records
// in a git checkout.
func resolve(version, commit, date string, bi *debug.BuildInfo) Info {
	in := Info{Version: version, Commit: commit, Date: date, GoVersion: runtime.Version()}
	if bi != nil {
		if bi.GoVersion != "" {
			in.GoVersion = bi.GoVersion
		}
		if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			in.Version = bi.Main.Version
		}
		var rev, when string
		var dirty bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if in.Commit == "" && rev != "" {
			in.Commit = rev
			if dirty {
				in.Commit += "-dirty"
			}
		}
		if in.Date == "" {
			in.Date = when
		}
	}
	if in.Version == "" {
		in.Version = "dev"
	}
	if in.Commit == "" {
		in.Commit = "unknown"
	}
	if in.Date == "" {
		in.Date = "unknown"
	}
	return in
}

// ShortCommit is the commit's first 12 characters (and a "-dirty" mark).
func (in Info) ShortCommit() string {
	c, dirty := strings.CutSuffix(in.Commit, "-dirty")
	if len(c) > 12 {
		c = c[:12]
	}
	if dirty {
		c += "-dirty"
	}
	return c
}

// UserAgent is the User-Agent header ipledger's own HTTP clients send:
// "PRODUCT/VERSION (commit SHORT)", e.g. "ipledger-cli/v1.2.0 (commit
// 0123456789ab)". A receiver can match on the product and tell which build
// called it.
func UserAgent(product string) string {
	in := Get()
	return product + "/" + in.Version + " (commit " + in.ShortCommit() + ")"
}
