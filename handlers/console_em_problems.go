package handlers

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/ipledger/ipledger/allocator"
)

// placeholderMAC stands in for a malformed BMC MAC in the second pass of
// emProblems (a locally administered address; problems it causes are
// dropped).
const placeholderMAC = "02:00:00:00:00:00"

var dpuProblem = regexp.MustCompile(`^expected_dpus\[(\d+)\]`)

// emProblems returns every problem of an ExpectedMachine form at once.
// allocator.ExpectedMachineProblems reports format problems (422) and
// checks conflicts with other records (409) only for a well-formed record;
// so when it finds format problems, the record is checked a second time
// with the malformed parts left out (a bad field emptied, a bad DPU row
// dropped, a bad MAC replaced by a placeholder) and the conflicts found
// then are added, each under its own field (DPU rows renumbered back).
// When a problem cannot be left out (the DPU list as a whole), the first
// pass is the answer.
func emProblems(ctx context.Context, a *allocator.Allocator, id string, spec allocator.ExpectedMachineSpec) ([]*allocator.Error, error) {
	ps, err := a.ExpectedMachineProblems(ctx, id, spec)
	if err != nil || len(ps) == 0 {
		return ps, err
	}
	invalid := false
	for _, p := range ps {
		invalid = invalid || p.Code == allocator.CodeInvalid
	}
	if !invalid {
		return ps, nil
	}
	clean := spec
	badRow := map[int]bool{}
	for _, p := range ps {
		if m := dpuProblem.FindStringSubmatch(p.Field); m != nil {
			var i int
			fmt.Sscan(m[1], &i)
			badRow[i] = true
			continue
		}
		switch top, _, _ := strings.Cut(p.Field, "["); strings.SplitN(top, ".", 2)[0] {
		case "bmc_mac_address":
			clean.BmcMacAddress = placeholderMAC
		case "bmc_username":
			clean.BmcUsername = ""
		case "bmc_password":
			clean.BmcPassword = nil
		case "chassis_serial_number":
			clean.ChassisSerialNumber = ""
		case "fallback_dpu_serial_numbers":
			clean.FallbackDpuSerialNumbers = []string{}
		case "sku_id":
			clean.SkuID = nil
		case "metadata":
			clean.Metadata = &allocator.Metadata{Labels: []allocator.Label{}}
		default:
			return ps, nil
		}
	}
	var back []int // clean row j is spec row back[j]
	if spec.ExpectedDpus != nil {
		rows := []allocator.ExpectedDpu{}
		for i, d := range *spec.ExpectedDpus {
			if !badRow[i] {
				rows = append(rows, d)
				back = append(back, i)
			}
		}
		clean.ExpectedDpus = &rows
	}
	more, err := a.ExpectedMachineProblems(ctx, id, clean)
	if err != nil {
		return ps, nil
	}
	for _, p := range more {
		if p.Code == allocator.CodeInvalid || strings.HasPrefix(p.Field, "bmc_mac_address") {
			continue
		}
		q := *p
		if m := dpuProblem.FindStringSubmatch(p.Field); m != nil {
			var j int
			fmt.Sscan(m[1], &j)
			if j >= len(back) {
				continue
			}
			q.Field = fmt.Sprintf("expected_dpus[%d]", back[j]) + strings.TrimPrefix(p.Field, m[0])
		}
		ps = append(ps, &q)
	}
	return ps, nil
}
