package emfile

import (
	"encoding/json"
	"testing"
)

func TestClientShareSplitsTheCount(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ count, clients int }{{10000, 8}, {500, 8}, {3, 8}, {7, 1}} {
		sum, lo, hi := 0, c.count, 0
		for id := 0; id < c.clients; id++ {
			n := ClientShare(c.count, c.clients, id)
			sum += n
			lo, hi = min(lo, n), max(hi, n)
		}
		if sum != c.count || hi-lo > 1 {
			t.Errorf("count %d over %d clients: sum %d, shares %d…%d", c.count, c.clients, sum, lo, hi)
		}
	}
}

func TestGenerateForIngestDeclaresEachReportOnce(t *testing.T) {
	t.Parallel()
	var f struct {
		ExpectedMachines []struct {
			Mac  string `json:"bmc_mac_address"`
			DPUs []struct {
				Serial string `json:"serial_number"`
				V4     string `json:"loopback_ip"`
				V6     string `json:"loopback_ip_v6"`
			} `json:"expected_dpus"`
		} `json:"expected_machines"`
	}
	if err := json.Unmarshal(GenerateForIngest("bu", 8, 500, 1250, 2, 0), &f); err != nil {
		t.Fatal(err)
	}
	if len(f.ExpectedMachines) != 500 {
		t.Fatalf("%d records, want 500", len(f.ExpectedMachines))
	}
	seen := map[string]bool{}
	for _, em := range f.ExpectedMachines {
		for _, k := range []string{em.Mac, em.DPUs[0].Serial, em.DPUs[1].Serial, em.DPUs[0].V4, em.DPUs[1].V6} {
			if seen[k] {
				t.Fatalf("%s declared twice", k)
			}
			seen[k] = true
		}
	}
	if got, want := f.ExpectedMachines[0].Mac, IngestMAC("bu", 0, 1250); got != want {
		t.Errorf("first MAC %s, want %s (client 0's report -first)", got, want)
	}
}
