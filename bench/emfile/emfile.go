// Package emfile generates NICo expected-machines files of any size for
// the import benchmarks (bench, scripts/bench-import.sh), and the hosts,
// DPUs and ExpectedMachines of bench/loadgen's ingest runs
// (scripts/bench-ratios.sh, scripts/bench-bringup.sh).
package emfile

import (
	"fmt"
	"strconv"
)

// Pools is the site configuration the files' reservations fit: lo-ip with
// an explicit /14 (every record's reserved loopback) next to an automatic
// range, and lo-ip-v6.
const Pools = `
[pools.lo-ip]
type = "ipv4"
ranges = [{ start = "10.64.0.0", end = "10.68.0.0", auto_assign = false }, { start = "10.80.0.0", end = "10.81.0.0" }]

[pools.lo-ip-v6]
type = "ipv6"
prefix = "fd00:180::/64"
`

// Generate returns a file of n records, each with a BMC MAC, a BMC user name,
// a chassis serial and one DPU whose IPv4 loopback is reserved; shift
// gives record i the reservation of record i+shift (mod n), so two files
// with different shifts move every reservation to another record.
func Generate(n, shift int) []byte {
	b := make([]byte, 0, n*170)
	b = append(b, `{"expected_machines":[`...)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		j := (i + shift) % n
		b = append(b, `{"bmc_mac_address":"`...)
		b = append(b, fmt.Sprintf("0a:00:00:%02x:%02x:%02x", i>>16&255, i>>8&255, i&255)...)
		b = append(b, `","bmc_username":"root","chassis_serial_number":"C`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `","expected_dpus":[{"serial_number":"MT`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `","loopback_ip":"`...)
		b = append(b, fmt.Sprintf("10.%d.%d.%d", 64+(j>>16), j>>8&255, j&255)...)
		b = append(b, `"}]}`...)
	}
	return append(b, "]}\n"...)
}
