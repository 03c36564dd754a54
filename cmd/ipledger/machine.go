package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ipledger/ipledger/allocator"
)

// The machine and binding commands: `ipledger machine
// list|show|report|discover|decommission|delete [--force]` and
// `ipledger binding list`.

func newMachineCmd(cf *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "machine", Short: "Ingested hosts and DPUs: list, show, report, discover, decommission, delete"}

	var state string
	list := &cobra.Command{
		Use: "list", Short: "List managed hosts with their DPUs and loopbacks", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			q := url.Values{}
			if state != "" {
				q.Set("state", state)
			}
			var items []allocator.Machine
			q.Set("limit", "1000")
			raws, _, err := listPages[json.RawMessage](c, "/api/v1/machines", q, false)
			if err != nil {
				return err
			}
			if c.json {
				b, _ := json.Marshal(map[string]any{"items": raws})
				return c.printJSON(b)
			}
			for _, r := range raws {
				var m allocator.Machine
				if err := json.Unmarshal(r, &m); err != nil {
					return err
				}
				items = append(items, m)
			}
			c.table([]string{"MACHINE_ID", "KIND", "STATE", "BMC_MAC / SERIAL", "LOOPBACK_IP", "LOOPBACK_IP_V6"}, machineRows(items))
			return nil
		},
	}
	list.Flags().StringVar(&state, "state", "", "only hosts in this state: ready or decommissioned")
	cmd.AddCommand(list)

	cmd.AddCommand(&cobra.Command{
		Use: "show ID", Short: "Show one machine (machine_id, host BMC MAC or DPU serial number)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if _, err := c.call("GET", "/api/v1/machines/"+esc(args[0]), nil, "", nil, &raw); err != nil {
				return err
			}
			if c.json {
				return c.printJSON(raw)
			}
			var m allocator.Machine
			if err := json.Unmarshal(raw, &m); err != nil {
				return err
			}
			if m.Kind == allocator.KindHost {
				fmt.Fprintf(c.out, "host %s\n  state: %s\n  bmc_mac_address: %s\n  chassis_serial_number: %s\n  expected_machine_id: %s\n",
					m.MachineID, m.State, orDash(m.BmcMacAddress), m.ChassisSerialNumber, orDash(m.ExpectedMachineID))
			} else {
				fmt.Fprintf(c.out, "dpu %s\n  state: %s\n  serial_number: %s\n  bmc_mac_address: %s\n  host_machine_id: %s\n",
					m.MachineID, m.State, m.SerialNumber, orDash(m.BmcMacAddress), orDash(m.HostMachineID))
			}
			c.table([]string{"MACHINE_ID", "KIND", "STATE", "BMC_MAC / SERIAL", "LOOPBACK_IP", "LOOPBACK_IP_V6"}, machineRows([]allocator.Machine{m}))
			return nil
		},
	})

	var (
		bmc, chassis string
		dpus         []string
		dpuBMCs      []string
	)
	report := &cobra.Command{
		Use:   "report --bmc-mac MAC [--chassis-serial S] --dpu SERIAL …",
		Short: "Send a site-explorer report: record a host and its DPUs and assign their loopbacks (operator)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			spec := allocator.ReportSpec{BmcMacAddress: bmc, ChassisSerialNumber: chassis, DPUs: []allocator.ReportDPU{}}
			for _, d := range dpus {
				for _, s := range strings.Split(d, ",") {
					spec.DPUs = append(spec.DPUs, allocator.ReportDPU{SerialNumber: s})
				}
			}
			if err := setDPUBMCs(spec.DPUs, dpuBMCs); err != nil {
				return err
			}
			return printIngest(c, "/api/v1/site-explorer/reports", spec)
		},
	}
	report.Flags().StringVar(&bmc, "bmc-mac", "", "the host's BMC MAC address (required)")
	report.Flags().StringVar(&chassis, "chassis-serial", "", "the host's chassis serial number")
	report.Flags().StringArrayVar(&dpus, "dpu", nil, "serial number of a DPU of the host (repeatable, or comma-separated)")
	report.Flags().StringArrayVar(&dpuBMCs, "dpu-bmc-mac", nil, "SERIAL=MAC: the BMC MAC address of the reported DPU SERIAL (repeatable)")
	_ = report.MarkFlagRequired("bmc-mac")
	cmd.AddCommand(report)

	var hostBMC string
	discover := &cobra.Command{
		Use: "discover SERIAL [--host-bmc-mac MAC]", Short: "Ingest one DPU found directly; its reservation is found by serial (operator)",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			return printIngest(c, "/api/v1/machines:discover", allocator.DiscoverSpec{SerialNumber: args[0], HostBmcMacAddress: hostBMC})
		},
	}
	discover.Flags().StringVar(&hostBMC, "host-bmc-mac", "", "BMC MAC address of the DPU's host, when known")
	cmd.AddCommand(discover)

	cmd.AddCommand(&cobra.Command{
		Use: "decommission ID", Short: "Take a ready host (and its DPUs) out of service (operator); values stay until delete", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if _, err := c.call("POST", "/api/v1/machines/"+esc(args[0])+":decommission", nil, "", nil, &raw); err != nil {
				return err
			}
			if c.json {
				return c.printJSON(raw)
			}
			var m allocator.Machine
			if err := json.Unmarshal(raw, &m); err != nil {
				return err
			}
			fmt.Fprintf(c.out, "%s %s is %s\n", m.Kind, m.MachineID, m.State)
			return nil
		},
	})

	var force, yes bool
	del := &cobra.Command{
		Use:   "delete ID [--force] [--yes]",
		Short: "Delete a decommissioned machine, or force delete a ready one (admin); shows the impact and asks first",
		Long: `Delete a machine permanently. The impact is shown first: per value whether it is
released, returned to its reservation (declared for that DPU's serial), or, on a
force delete of a machine that is not decommissioned, quarantined because the
hardware may still carry it. Without --yes the command asks for confirmation; a
force delete asks you to type the machine id.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			id := args[0]
			q := ""
			if force {
				q = "?force=true"
			}
			var imp allocator.DeleteImpact
			var raw json.RawMessage
			if _, err := c.call("GET", "/api/v1/machines/"+esc(id)+"/delete-impact"+q, nil, "", nil, &raw); err != nil {
				return err
			}
			if err := json.Unmarshal(raw, &imp); err != nil {
				return err
			}
			if !yes {
				printImpact(cmd.ErrOrStderr(), &imp)
				if err := confirm(cmd.InOrStdin(), cmd.ErrOrStderr(), imp.MachineID, force); err != nil {
					return err
				}
			}
			if _, err := c.call("DELETE", "/api/v1/machines/"+esc(id)+q, nil, "", nil, nil); err != nil {
				return err
			}
			if c.json {
				return c.printJSON(raw)
			}
			if yes {
				printImpact(c.out, &imp)
			}
			fmt.Fprintf(c.out, "deleted %s\n", imp.MachineID)
			return nil
		},
	}
	del.Flags().BoolVar(&force, "force", false, "force delete a machine that is not decommissioned (admin): values it may still carry go to quarantine")
	del.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	cmd.AddCommand(del)
	return cmd
}

// machineRows flattens hosts and their DPUs for a table.
func machineRows(ms []allocator.Machine) [][]string {
	var rows [][]string
	dpuRow := func(d allocator.Machine, indent string) []string {
		nc := d.NetworkConfig
		if nc == nil {
			nc = &allocator.NetworkConfig{}
		}
		st := d.State
		if st == "" {
			st = "-"
		}
		return []string{indent + d.MachineID, "dpu", st, d.SerialNumber, orDash(nc.LoopbackIP), orDash(nc.LoopbackIPv6)}
	}
	for _, m := range ms {
		if m.Kind != allocator.KindHost {
			rows = append(rows, dpuRow(m, ""))
			continue
		}
		rows = append(rows, []string{m.MachineID, "host", m.State, orDash(m.BmcMacAddress), "", ""})
		for _, d := range m.DPUs {
			d.State = m.State
			rows = append(rows, dpuRow(d, "  "))
		}
	}
	return rows
}

// printIngest posts a report or discovery and prints its machines and
// what stayed incomplete.
func printIngest(c *client, path string, body any) error {
	var raw json.RawMessage
	if _, err := c.call("POST", path, body, "", nil, &raw); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(raw)
	}
	var res allocator.IngestResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return err
	}
	c.table([]string{"MACHINE_ID", "KIND", "STATE", "BMC_MAC / SERIAL", "LOOPBACK_IP", "LOOPBACK_IP_V6"}, machineRows(res.Machines))
	if len(res.Incomplete) > 0 {
		fmt.Fprintln(c.out)
		fmt.Fprintln(c.out, "incomplete (completed later by reconciliation or pool growth):")
		var rows [][]string
		for _, i := range res.Incomplete {
			rows = append(rows, []string{i.MachineID, i.Family, string(i.Code), i.Message})
		}
		c.table([]string{"MACHINE_ID", "FAMILY", "CODE", "MESSAGE"}, rows)
	}
	return nil
}

func printImpact(w io.Writer, imp *allocator.DeleteImpact) {
	kind := "delete"
	if imp.Force {
		kind = "force delete"
	}
	fmt.Fprintf(w, "%s of %s:\n", kind, imp.MachineID)
	for _, v := range imp.Values {
		fmt.Fprintf(w, "  %-9s %-24s %-22s %s\n", v.Pool, v.Value, v.Action, v.Reason)
	}
	if imp.Warning != "" {
		fmt.Fprintf(w, "%s\n", imp.Warning)
	}
}

// confirm asks on in: y/yes for a delete; the machine id for a force delete.
func confirm(in io.Reader, out io.Writer, machineID string, force bool) error {
	if force {
		fmt.Fprintf(out, "Type the machine id (%s) to force delete it: ", machineID)
	} else {
		fmt.Fprintf(out, "Delete %s? [y/N]: ", machineID)
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(out)
		return fmt.Errorf("not confirmed (no answer on stdin; use --yes to skip the question)")
	}
	line = strings.TrimSpace(line)
	if force && line == machineID {
		return nil
	}
	if !force && (strings.EqualFold(line, "y") || strings.EqualFold(line, "yes")) {
		return nil
	}
	return fmt.Errorf("not confirmed; nothing deleted")
}

func newBindingCmd(cf *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "binding", Short: "DPU loopback bindings: active values against reservations"}
	var status string
	list := &cobra.Command{
		Use: "list [--status S]", Short: "List per DPU its loopbacks, reservations and status per family", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			q := url.Values{}
			if status != "" {
				q.Set("status", status)
			}
			q.Set("limit", "1000")
			all, _, err := listPages[allocator.Binding](c, "/api/v1/dpu-bindings", q, false)
			if err != nil {
				return err
			}
			if all == nil {
				all = []allocator.Binding{}
			}
			if c.json {
				b, _ := json.Marshal(map[string]any{"items": all})
				return c.printJSON(b)
			}
			sort.SliceStable(all, func(i, j int) bool { return all[i].SerialNumber < all[j].SerialNumber })
			var rows [][]string
			for _, b := range all {
				rows = append(rows, []string{b.SerialNumber, b.MachineID, orDash(b.LoopbackIP), orDash(b.ReservedIP), b.StatusV4,
					orDash(b.LoopbackIPv6), orDash(b.ReservedIPv6), b.StatusV6})
			}
			c.table([]string{"SERIAL", "MACHINE_ID", "LOOPBACK_IP", "RESERVED_IP", "STATUS_V4", "LOOPBACK_IP_V6", "RESERVED_IP_V6", "STATUS_V6"}, rows)
			return nil
		},
	}
	list.Flags().StringVar(&status, "status", "", "only DPUs with this status in either family: reserved, automatic, pending, conflict, missing, none")
	cmd.AddCommand(list)
	return cmd
}

// setDPUBMCs applies --dpu-bmc-mac SERIAL=MAC to the reported DPUs. The
// MAC is sent as typed: the server checks and normalizes it, so the CLI
// and the API refuse the same spellings.
func setDPUBMCs(dpus []allocator.ReportDPU, pairs []string) error {
	for _, p := range pairs {
		serial, mac, ok := strings.Cut(p, "=")
		if !ok || serial == "" || mac == "" {
			return fmt.Errorf("--dpu-bmc-mac %q: want SERIAL=MAC", p)
		}
		found := false
		for i := range dpus {
			if dpus[i].SerialNumber == serial {
				dpus[i].BmcMacAddress = mac
				found = true
			}
		}
		if !found {
			return fmt.Errorf("--dpu-bmc-mac %q: no --dpu %s in this report", p, serial)
		}
	}
	return nil
}
