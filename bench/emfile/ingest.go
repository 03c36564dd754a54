package emfile

import (
	"crypto/sha256"
	"fmt"
	"strconv"
)

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

// The hosts of a bench/loadgen ingest run with -run run: client id's
// report n (n counts from loadgen's -first) is the host IngestMAC(run,
// id, n) with chassis serial IngestChassis(run, id, n) and DPUs
// IngestDPU(run, id, n, 0 … dpus-1).

// IngestMAC is the BMC MAC of report n of client id in loadgen's ingest
// run run: a locally administered address derived from all three, so that
// the runs of one script report distinct hosts (a MAC shared by two runs
// would make the second run's reports updates of the first run's hosts).
func IngestMAC(run string, id, n int) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s/%d/%d", run, id, n))
	return fmt.Sprintf("02:%02x:%02x:%02x:%02x:%02x", h[0], h[1], h[2], h[3], h[4])
}

// IngestChassis is the chassis serial of client id's report n.
func IngestChassis(run string, id, n int) string {
	return run + "-" + strconv.Itoa(id) + "-" + strconv.Itoa(n)
}

// IngestDPU is the serial of DPU d of client id's report n.
func IngestDPU(run string, id, n, d int) string {
	return IngestChassis(run, id, n) + "-" + strconv.Itoa(d)
}

// ClientShare is how many of count requests client id of clients sends
// in loadgen's -count mode: count/clients, one more for the first
// count mod clients clients.
func ClientShare(count, clients, id int) int {
	n := count / clients
	if id < count%clients {
		n++
	}
	return n
}

// GenerateForIngest returns the ExpectedMachines of the hosts that
// bench/loadgen's ingest mode reports with -run run -clients clients
// -count count -first first: per client id, its ClientShare(count,
// clients, id) reports numbered from first, with dpus DPUs each, every
// DPU with a reserved IPv4 and IPv6 loopback from IngestPools' explicit
// ranges, starting offset values into them (so that several runs do not
// reserve the same values).
func GenerateForIngest(run string, clients, count, first, dpus, offset int) []byte {
	b := []byte(`{"expected_machines":[`)
	k := offset
	sep := false
	for id := 0; id < clients; id++ {
		for n := first; n < first+ClientShare(count, clients, id); n++ {
			if sep {
				b = append(b, ',')
			}
			sep = true
			b = append(b, `{"bmc_mac_address":"`...)
			b = append(b, IngestMAC(run, id, n)...)
			b = append(b, `","expected_dpus":[`...)
			for d := 0; d < dpus; d++ {
				if d > 0 {
					b = append(b, ',')
				}
				b = append(b, fmt.Sprintf(`{"serial_number":"%s","loopback_ip":"10.%d.%d.%d","loopback_ip_v6":"fd00:181::%x:%x"}`,
					IngestDPU(run, id, n, d), 64+(k>>16), (k>>8)&255, k&255, k>>16, k&0xffff)...)
				k++
			}
			b = append(b, "]}"...)
		}
	}
	return append(b, "]}\n"...)
}
