package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// benchConf is one network configuration both IPAM plugins accept as is:
// static reads the same {address, gateway} entries, and neither reads the
// ipam "type" (the runtime uses it to pick the binary).
var benchConf = conf("1.1.0", dualStackIPAM)

// BenchmarkADDProcess measures the latency of one ADD as a whole process:
// fork/exec of the binary, config on stdin, result on stdout, exit; for
// galactic-ipam and for the reference static IPAM plugin on the same
// configuration. ns/op is the wall time of one ADD.
func BenchmarkADDProcess(b *testing.B) {
	plugins := map[string]string{"galactic-ipam": pluginBin}
	if err := referencePlugins(); err != nil {
		b.Logf("reference static plugin unavailable, benchmarking galactic-ipam alone: %v", err)
	} else {
		plugins["static"] = filepath.Join(binDir, "static")
	}
	env := cniEnv("ADD", nil)
	for _, name := range []string{"galactic-ipam", "static"} {
		bin, ok := plugins[name]
		if !ok {
			continue
		}
		b.Run(name, func(b *testing.B) {
			if _, err := os.Stat(bin); err != nil {
				b.Fatal(err)
			}
			if p := run(b, bin, env, benchConf); p.exit != 0 {
				b.Fatalf("%s ADD failed: %s %s", name, p.stdout, p.stderr)
			}
			for b.Loop() {
				if p := run(b, bin, env, benchConf); p.exit != 0 {
					b.Fatalf("%s ADD failed: %s", name, p.stdout)
				}
			}
		})
	}
}

// BenchmarkADDProcessInterleaved runs galactic-ipam and static alternately
// (swapping which goes first every iteration) so that load from other
// processes on the machine hits both alike, and reports the median wall time
// of one ADD process of each (galactic-ns/ADD, static-ns/ADD) and their
// ratio (galactic/static). ns/op is the time of one pair.
func BenchmarkADDProcessInterleaved(b *testing.B) {
	if err := referencePlugins(); err != nil {
		b.Skipf("reference static plugin unavailable: %v", err)
	}
	static := filepath.Join(binDir, "static")
	env := cniEnv("ADD", nil)
	var galacticTimes, staticTimes []time.Duration
	timed := func(bin string) time.Duration {
		start := time.Now()
		if p := run(b, bin, env, benchConf); p.exit != 0 {
			b.Fatalf("%s ADD failed: %s", bin, p.stdout)
		}
		return time.Since(start)
	}
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			galacticTimes = append(galacticTimes, timed(pluginBin))
			staticTimes = append(staticTimes, timed(static))
		} else {
			staticTimes = append(staticTimes, timed(static))
			galacticTimes = append(galacticTimes, timed(pluginBin))
		}
		i++
	}
	g, s := median(galacticTimes), median(staticTimes)
	b.ReportMetric(float64(g.Nanoseconds()), "galactic-ns/ADD")
	b.ReportMetric(float64(s.Nanoseconds()), "static-ns/ADD")
	b.ReportMetric(float64(g)/float64(s), "galactic/static")
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}
