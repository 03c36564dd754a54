package allocator

import (
	"testing"

	"github.com/ipledger/ipledger/fault"
)

// An ExpectedMachine body accepts members ipledger does not store (NICo
// tools send whole documents), but not inside expected_dpus, ipledger's own
// member: a misspelt "loopback_ipv6" would drop a reservation silently.
func TestExpectedDPUMembersAreStrict(t *testing.T) {
	if _, err := DecodeExpectedMachineSpec([]byte(`{"bmc_mac_address":"0a:00:00:00:00:01","host_nics":[{"mac":"x"}],"rack_id":"r1",
		"expected_dpus":[{"serial_number":"A","loopback_ip_v6":"fd00::1"}]}`)); err != nil {
		t.Fatalf("NICo members: %v", err)
	}
	_, err := DecodeExpectedMachineSpec([]byte(`{"bmc_mac_address":"0a:00:00:00:00:01","expected_dpus":[{"serial_number":"A"},{"serial_number":"B","loopback_ipv6":"fd00::1"}]}`))
	if e, ok := fault.AsError(err); !ok || e.Code != fault.CodeInvalid || e.Field != "expected_dpus[1].loopback_ipv6" {
		t.Fatalf("misspelt reservation: %v", err)
	}
	_, err = ParseExpectedMachinesFile([]byte(`{"expected_machines":[{},{"expected_dpus":[{"serial_number":"A","Loopback_ip":"10.0.0.1"}]}]}`))
	if e, ok := fault.AsError(err); !ok || e.Field != "expected_machines[1].expected_dpus[0].Loopback_ip" {
		t.Fatalf("in a file: %v", err)
	}
}
