// Command emgen writes a NICo expected-machines file of -records records
// (bench/emfile: one DPU each with a reserved IPv4 loopback, reservations
// shifted by -shift records) to stdout, or with -pools the site
// configuration its reservations fit. scripts/bench-import.sh uses it.
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
	flag.Parse()
	if *pools {
		os.Stdout.WriteString(emfile.Pools)
		return
	}
	os.Stdout.Write(emfile.Generate(*n, *shift))
}
