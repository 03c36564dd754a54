// Package emfile generates NICo expected-machines files of any size for
// the import benchmarks (bench, scripts/bench-import.sh).
package emfile

import (
	"crypto/sha256"
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

// IngestPools is the site configuration of the ingest benchmark: lo-ip
// and lo-ip-v6 each with an automatic range and an explicit one that
// holds the reservations of GenerateForIngest.
const IngestPools = `
[pools.lo-ip]
type = "ipv4"
ranges = [{ start = "10.0.0.0", end = "10.4.0.0" }, { start = "10.64.0.0", end = "10.72.0.0", auto_assign = false }]

[pools.lo-ip-v6]
type = "ipv6"
ranges = [{ start = "fd00:180::", end = "fd00:180::4:0" }, { start = "fd00:181::", end = "fd00:181::8:0", auto_assign = false }]
`

// IngestMAC is the BMC MAC of report n of client id in loadgen's ingest
// run run: a locally administered address derived from all three, so that
// the runs of one script report distinct hosts (a MAC shared by two runs
// would make the second run's reports updates of the first run's hosts).
func IngestMAC(run string, id, n int) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s/%d/%d", run, id, n))
	return fmt.Sprintf("02:%02x:%02x:%02x:%02x:%02x", h[0], h[1], h[2], h[3], h[4])
}

// GenerateForIngest returns the ExpectedMachines of the hosts that
// bench/loadgen's ingest mode reports with -run run: per client 0 …
// clients-1, its reports 0 … per-1, the host's BMC MAC and dpus DPU
// serials exactly as loadgen forms them, every DPU with a reserved IPv4
// and IPv6 loopback from IngestPools' explicit ranges, starting offset
// values into them (so that several runs do not reserve the same values).
func GenerateForIngest(run string, clients, per, dpus, offset int) []byte {
	b := []byte(`{"expected_machines":[`)
	k := offset
	for id := 0; id < clients; id++ {
		for n := 0; n < per; n++ {
			if id > 0 || n > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"bmc_mac_address":"`+IngestMAC(run, id, n)+`","expected_dpus":[`...)
			for d := 0; d < dpus; d++ {
				if d > 0 {
					b = append(b, ',')
				}
				b = append(b, fmt.Sprintf(`{"serial_number":"%s-%d-%d-%d","loopback_ip":"10.%d.%d.%d","loopback_ip_v6":"fd00:181::%x:%x"}`,
					run, id, n, d, 64+(k>>16), (k>>8)&255, k&255, k>>16, k&0xffff)...)
				k++
			}
			b = append(b, "]}"...)
		}
	}
	return append(b, "]}\n"...)
}
