// Command emgen writes a NICo expected-machines file of -records records
// (bench/emfile: one DPU each with a reserved IPv4 loopback, reservations
// shifted by -shift records) to stdout, or with -pools the site
// configuration its reservations fit; with -ingest-run, the
// ExpectedMachines of the hosts a loadgen ingest run reports, every DPU
// with reserved loopbacks. scripts/bench-import.sh,
// scripts/bench-ratios.sh and scripts/bench-bringup.sh use it.
package main

import (
	"flag"
	"os"

	"github.com/ipledger/ipledger/bench/emfile"
)

func main() {
	n := flag.Int("records", 60000, "records in the file")
	shift := flag.Int("shift", 0, "give record i the reservation of record i+shift")
	pools := flag.Bool("pools", false, "print the pool file (TOML) instead")
	ingest := flag.String("ingest-run", "", "write the ExpectedMachines of loadgen's ingest run with this -run id instead (reserved loopbacks on every DPU)")
	clients := flag.Int("clients", 8, "with -ingest-run: loadgen's clients")
	per := flag.Int("per", 1000, "with -ingest-run: reports per client to declare")
	count := flag.Int("count", 0, "with -ingest-run: reports in all, split among -clients as loadgen -count splits them (instead of -per)")
	first := flag.Int("first", 0, "with -ingest-run: loadgen's -first (number of each client's first report)")
	dpus := flag.Int("dpus", 2, "with -ingest-run: DPUs per host")
	offset := flag.Int("offset", 0, "with -ingest-run: first reserved value's offset in the explicit ranges")
	flag.Parse()
	switch {
	case *pools && *ingest != "":
		os.Stdout.WriteString(emfile.IngestPools)
		return
	case *pools:
		os.Stdout.WriteString(emfile.Pools)
		return
	case *ingest != "":
		if *count == 0 {
			*count = *clients * *per
		}
		os.Stdout.Write(emfile.GenerateForIngest(*ingest, *clients, *count, *first, *dpus, *offset))
		return
	}
	os.Stdout.Write(emfile.Generate(*n, *shift))
}
