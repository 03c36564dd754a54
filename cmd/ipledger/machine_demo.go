package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/ipledger/ipledger/allocator"
)

// The machines part of `serve --demo` (README.md): a small believable
// site with ExpectedMachines of one or two DPUs, reservations on some, and
// ingested DPUs in the binding statuses an operator meets:
//
//	r02-u10  two DPUs, both reserved (one IPv4 only)   reserved / reserved+automatic
//	r02-u11  one DPU, no reservation                    automatic
//	r02-u12  reservation edited after ingestion         pending (IPv4)
//	r02-u13  declares MT2302X00041, which sits in r02-u14's chassis
//	r02-u14  reports MT2302X00041 and its own DPU       conflict (IPv4)
//	r02-u15  ingested, then decommissioned
//	r02-u16  force deleted: its values are quarantined
//	MT2302X00061 discovered without a known host (host-less entry)
//
// and every ExpectedMachine an earlier demo step created is ingested as
// its DPUs report in. `missing` and `none` need an exhausted or absent
// loopback pool, which a healthy demo site does not have.

func demoStr(s string) *string { return &s }

type demoEM struct {
	mac, name string
	dpus      []allocator.ExpectedDPU
}

var demoMachineEMs = []demoEM{
	{"0a:00:00:00:02:10", "r02-u10", []allocator.ExpectedDPU{
		{SerialNumber: "MT2302X00011", LoopbackIP: demoStr("10.180.62.220"), LoopbackIPv6: demoStr("fd00:180:62:1::21")},
		{SerialNumber: "MT2302X00012", LoopbackIP: demoStr("10.180.62.221")}}},
	{"0a:00:00:00:02:11", "r02-u11", []allocator.ExpectedDPU{{SerialNumber: "MT2302X00021"}}},
	{"0a:00:00:00:02:12", "r02-u12", []allocator.ExpectedDPU{{SerialNumber: "MT2302X00031", LoopbackIP: demoStr("10.180.62.230")}}},
	{"0a:00:00:00:02:13", "r02-u13", []allocator.ExpectedDPU{{SerialNumber: "MT2302X00041", LoopbackIP: demoStr("10.180.62.240")}}},
	{"0a:00:00:00:02:14", "r02-u14", []allocator.ExpectedDPU{{SerialNumber: "MT2302X00051"}}},
	{"0a:00:00:00:02:15", "r02-u15", []allocator.ExpectedDPU{{SerialNumber: "MT2302X00071"}}},
	{"0a:00:00:00:02:16", "r02-u16", []allocator.ExpectedDPU{{SerialNumber: "MT2302X00081"}}},
}

func demoMachines(ctx context.Context, a *allocator.Allocator) error {
	mine := map[string]bool{}
	for _, e := range demoMachineEMs {
		mine[e.mac] = true
	}
	// Ingest what an earlier demo step expects, as its DPUs report in.
	page, err := a.ListExpectedMachines(ctx, allocator.ExpectedMachineFilter{Limit: 1000})
	if err != nil {
		return err
	}
	for _, em := range page.Items {
		if mine[em.BmcMacAddress] {
			continue
		}
		spec := allocator.ReportSpec{BmcMacAddress: em.BmcMacAddress, ChassisSerialNumber: em.ChassisSerialNumber}
		for _, d := range em.ExpectedDPUs {
			spec.DPUs = append(spec.DPUs, allocator.ReportDPU{SerialNumber: d.SerialNumber})
		}
		if len(spec.DPUs) == 0 {
			for _, s := range em.FallbackDPUSerialNumbers {
				spec.DPUs = append(spec.DPUs, allocator.ReportDPU{SerialNumber: s})
			}
		}
		if _, err := a.Report(ctx, spec); err != nil {
			return fmt.Errorf("demo report of %s: %w", em.BmcMacAddress, err)
		}
	}
	// Our own ExpectedMachines; one that collides with an earlier step's
	// records is left out (its hosts are then ingested without it).
	for _, e := range demoMachineEMs {
		if _, err := a.GetExpectedMachine(ctx, e.mac); err == nil {
			continue
		}
		dpus := e.dpus
		spec := allocator.ExpectedMachineSpec{BmcMacAddress: e.mac, BmcUsername: "admin", BmcPassword: demoStr("demo-" + e.name),
			ChassisSerialNumber: "CHS-" + e.name, FallbackDPUSerialNumbers: []string{},
			Metadata: &allocator.Metadata{Name: e.name, Labels: []allocator.Label{{Key: "rack", Value: "r02"}}}, ExpectedDPUs: &dpus}
		if _, err := a.CreateExpectedMachine(ctx, spec); err != nil {
			slog.Warn("demo ExpectedMachine left out", "bmc_mac_address", e.mac, "error", err)
		}
	}
	report := func(mac, name string, serials ...string) error {
		spec := allocator.ReportSpec{BmcMacAddress: mac, ChassisSerialNumber: "CHS-" + name}
		for _, s := range serials {
			spec.DPUs = append(spec.DPUs, allocator.ReportDPU{SerialNumber: s})
		}
		_, err := a.Report(ctx, spec)
		if err != nil {
			return fmt.Errorf("demo report of %s: %w", name, err)
		}
		return nil
	}
	steps := []func() error{
		func() error { return report("0a:00:00:00:02:10", "r02-u10", "MT2302X00012", "MT2302X00011") },
		func() error { return report("0a:00:00:00:02:11", "r02-u11", "MT2302X00021") },
		func() error { return report("0a:00:00:00:02:12", "r02-u12", "MT2302X00031") },
		// The reservation is edited while the DPU is active: pending.
		func() error {
			_, err := a.PatchExpectedMachine(ctx, "0a:00:00:00:02:12",
				[]byte(`{"expected_dpus":[{"serial_number":"MT2302X00031","loopback_ip":"10.180.62.231"}]}`), nil)
			if err != nil {
				slog.Warn("demo reservation edit left out", "error", err)
			}
			return nil
		},
		// A DPU declared for r02-u13 turns up in r02-u14's chassis: conflict.
		func() error { return report("0a:00:00:00:02:14", "r02-u14", "MT2302X00051", "MT2302X00041") },
		func() error {
			_, err := a.Discover(ctx, allocator.DiscoverSpec{SerialNumber: "MT2302X00061"})
			return err
		},
		func() error { return report("0a:00:00:00:02:15", "r02-u15", "MT2302X00071") },
		func() error {
			_, err := a.Decommission(ctx, "0a:00:00:00:02:15")
			return err
		},
		func() error { return report("0a:00:00:00:02:16", "r02-u16", "MT2302X00081") },
		func() error {
			_, err := a.DeleteMachine(ctx, "0a:00:00:00:02:16", true)
			return err
		},
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	return nil
}
