package sitekit

import (
	"github.com/ipledger/ipledger/allocator"
)

// DPU is one expected DPU: its serial number and the loopbacks reserved
// for it ("" for none).
type DPU struct{ Serial, V4, V6 string }

// ExpectedMachine declares the ExpectedMachine of BMC MAC mac (chassis
// "CHS-"+mac) with its DPUs through the allocator, as the API does.
func (s *Site) ExpectedMachine(mac string, dpus ...DPU) *allocator.ExpectedMachine {
	s.T.Helper()
	list := make([]allocator.ExpectedDPU, 0, len(dpus))
	for _, d := range dpus {
		e := allocator.ExpectedDPU{SerialNumber: d.Serial}
		if d.V4 != "" {
			e.LoopbackIP = &d.V4
		}
		if d.V6 != "" {
			e.LoopbackIPv6 = &d.V6
		}
		list = append(list, e)
	}
	em, err := s.A.CreateExpectedMachine(s.Ctx, allocator.ExpectedMachineSpec{BmcMacAddress: mac,
		ChassisSerialNumber: "CHS-" + mac, FallbackDPUSerialNumbers: []string{}, ExpectedDPUs: &list})
	if err != nil {
		s.T.Fatalf("create expected machine %s: %v", mac, err)
	}
	return em
}

// Report ingests the report of the host of BMC MAC mac (chassis
// "CHS-"+mac) carrying the DPUs of these serial numbers.
func (s *Site) Report(mac string, serials ...string) *allocator.IngestResult {
	s.T.Helper()
	spec := allocator.ReportSpec{BmcMacAddress: mac, ChassisSerialNumber: "CHS-" + mac, DPUs: []allocator.ReportDPU{}}
	for _, x := range serials {
		spec.DPUs = append(spec.DPUs, allocator.ReportDPU{SerialNumber: x})
	}
	res, err := s.A.Report(s.Ctx, spec)
	if err != nil {
		s.T.Fatalf("report %s %v: %v", mac, serials, err)
	}
	return res
}
