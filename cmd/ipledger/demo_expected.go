package main

import (
	"context"
	"fmt"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/docs/samples"
)

// The ExpectedMachines part of `serve --demo` (README.md): the sample
// NICo file operators already have (rack r01, two records) plus three more
// records of rack r01 with one or two DPUs and reservations on some, all
// inside the demo pools (lo-ip explicit 10.180.62.200-255, lo-ip-v6
// explicit fd00:180:62:1::-fd00:180:62:1::ff).

// demoExpectedMachinesSample is docs/samples/expected-machines.json.
var demoExpectedMachinesSample = samples.ExpectedMachines

// demoExpectedMachinesExtra are three more believable records.
const demoExpectedMachinesExtra = `{
  "expected_machines": [
    {
      "bmc_mac_address": "0a:00:00:00:01:03",
      "bmc_username": "admin",
      "bmc_password": "factory-default-3",
      "chassis_serial_number": "CHS-000103",
      "fallback_dpu_serial_numbers": [],
      "metadata": {"name": "r01-u12", "description": "one DPU, dual-stack reservation", "labels": [{"key": "rack", "value": "r01"}, {"key": "env", "value": "prod"}]},
      "expected_dpus": [
        {"serial_number": "MT2301X00031", "loopback_ip": "10.180.62.212", "loopback_ip_v6": "fd00:180:62:1::31"}
      ]
    },
    {
      "bmc_mac_address": "0a:00:00:00:01:04",
      "bmc_username": "admin",
      "bmc_password": "factory-default-4",
      "chassis_serial_number": "CHS-000104",
      "fallback_dpu_serial_numbers": [],
      "metadata": {"name": "r01-u13", "description": "two DPUs, only the first reserved", "labels": [{"key": "rack", "value": "r01"}, {"key": "env", "value": "prod"}]},
      "sku_id": "sku-2u-2dpu",
      "expected_dpus": [
        {"serial_number": "MT2301X00041", "loopback_ip": "10.180.62.213"},
        {"serial_number": "MT2301X00042"}
      ]
    },
    {
      "bmc_mac_address": "0a:00:00:00:01:05",
      "bmc_username": "admin",
      "bmc_password": "factory-default-5",
      "chassis_serial_number": "CHS-000105",
      "fallback_dpu_serial_numbers": [],
      "metadata": {"name": "r01-u14", "description": "IPv6-only reservation", "labels": [{"key": "rack", "value": "r01"}, {"key": "env", "value": "staging"}]},
      "expected_dpus": [
        {"serial_number": "MT2301X00051", "loopback_ip_v6": "fd00:180:62:1::51"}
      ]
    }
  ]
}`

// demoExpectedMachines creates the demo records one by one (not
// replace-all, so records of other demo steps are left alone).
func demoExpectedMachines(ctx context.Context, a *allocator.Allocator) error {
	for _, file := range []string{demoExpectedMachinesSample, demoExpectedMachinesExtra} {
		specs, err := allocator.ParseExpectedMachinesFile([]byte(file))
		if err != nil {
			return fmt.Errorf("demo expected machines: %w", err)
		}
		for _, s := range specs {
			if _, err := a.CreateExpectedMachine(ctx, s); err != nil {
				return fmt.Errorf("demo ExpectedMachine %s: %w", s.BmcMacAddress, err)
			}
		}
	}
	return nil
}
