package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ipledger/ipledger/allocator"
)

// `ipledger expected-machine list|show|add|patch|update|delete|replace-all|erase`:
// a client of /api/v1/expected-machines (docs/reservations.md, docs/api.md,
// README.md). Omitting --expected-dpu (or NICo's
// --dpu-loopback-reservations) keeps the stored reservations (the REST
// compatibility rule); --clear-expected-dpus or
// --dpu-loopback-reservations '[]' removes them.

func emDPUText(d allocator.ExpectedDPU) string {
	s := d.SerialNumber
	if d.LoopbackIP != nil {
		s += " v4=" + *d.LoopbackIP
	}
	if d.LoopbackIPv6 != nil {
		s += " v6=" + *d.LoopbackIPv6
	}
	return s
}

func printExpectedMachines(c *client, items []allocator.ExpectedMachine) {
	var rows [][]string
	for _, em := range items {
		var dpus []string
		for _, d := range em.ExpectedDPUs {
			dpus = append(dpus, emDPUText(d))
		}
		rows = append(rows, []string{em.BmcMacAddress, em.ID, strconv.FormatInt(em.Version, 10), orDash(&em.ChassisSerialNumber),
			orDash(&em.Metadata.Name), orDash(emStrp(strings.Join(dpus, "; ")))})
	}
	c.table([]string{"BMC MAC", "ID", "VERSION", "CHASSIS SERIAL", "NAME", "EXPECTED DPUS"}, rows)
}

func emStrp(s string) *string { return &s }

func printExpectedMachine(c *client, em allocator.ExpectedMachine) {
	var labels []string
	for _, l := range em.Metadata.Labels {
		labels = append(labels, l.Key+"="+l.Value)
	}
	c.table([]string{"FIELD", "VALUE"}, [][]string{
		{"id", em.ID},
		{"version", strconv.FormatInt(em.Version, 10)},
		{"bmc_mac_address", em.BmcMacAddress},
		{"bmc_username", orDash(&em.BmcUsername)},
		{"bmc_password_set", strconv.FormatBool(em.BmcPasswordSet)},
		{"chassis_serial_number", orDash(&em.ChassisSerialNumber)},
		{"fallback_dpu_serial_numbers", orDash(emStrp(strings.Join(em.FallbackDPUSerialNumbers, ", ")))},
		{"metadata.name", orDash(&em.Metadata.Name)},
		{"metadata.description", orDash(&em.Metadata.Description)},
		{"metadata.labels", orDash(emStrp(strings.Join(labels, ", ")))},
		{"sku_id", orDash(em.SkuID)},
	})
	fmt.Fprintln(c.out)
	var rows [][]string
	for _, d := range em.ExpectedDPUs {
		rows = append(rows, []string{d.SerialNumber, orDash(d.LoopbackIP), orDash(d.LoopbackIPv6)})
	}
	if len(rows) == 0 {
		fmt.Fprintln(c.out, "no expected DPUs")
		return
	}
	c.table([]string{"DPU SERIAL", "LOOPBACK_IP", "LOOPBACK_IP_V6"}, rows)
}

// emOut prints one record answer: raw JSON for scripts, a table for people.
func emOut(c *client, raw json.RawMessage) error {
	if c.json {
		return c.printJSON(raw)
	}
	var em allocator.ExpectedMachine
	if err := json.Unmarshal(raw, &em); err != nil {
		return err
	}
	printExpectedMachine(c, em)
	return nil
}

func ifMatchHeader(v int64) map[string]string {
	if v <= 0 {
		return nil
	}
	return map[string]string{"If-Match": strconv.Quote(strconv.FormatInt(v, 10))}
}

func newExpectedMachineCmd(cf *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "expected-machine", Aliases: []string{"expected-machines", "em"},
		Short: "ExpectedMachines and their DPU loopback reservations"}
	base := "/api/v1/expected-machines"

	var lMAC, lSerial, lLabel, lSearch string
	var lLimit int
	list := &cobra.Command{
		Use: "list", Short: "List ExpectedMachines (every page unless --limit is given)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			q := url.Values{}
			for k, v := range map[string]string{"bmc_mac_address": lMAC, "serial_number": lSerial, "label": lLabel, "q": lSearch} {
				if v != "" {
					q.Set(k, v)
				}
			}
			if lLimit > 0 {
				q.Set("limit", strconv.Itoa(lLimit))
			}
			all := allocator.ExpectedMachinePage{Items: []allocator.ExpectedMachine{}}
			items, next, err := listPages[allocator.ExpectedMachine](c, base, q, lLimit > 0)
			if err != nil {
				return err
			}
			all.Items, all.NextCursor = append(all.Items, items...), next
			if c.json {
				b, err := json.Marshal(all)
				if err != nil {
					return err
				}
				return c.printJSON(b)
			}
			printExpectedMachines(c, all.Items)
			if all.NextCursor != "" {
				fmt.Fprintf(c.out, "more: --limit %d with cursor %s\n", lLimit, all.NextCursor)
			}
			return nil
		},
	}
	list.Flags().StringVar(&lMAC, "mac", "", "only this BMC MAC address")
	list.Flags().StringVar(&lSerial, "serial", "", "chassis, expected DPU or fallback DPU serial number")
	list.Flags().StringVar(&lLabel, "label", "", "metadata label KEY or KEY=VALUE")
	list.Flags().StringVar(&lSearch, "search", "", "case-insensitive text in MAC, chassis serial, name or DPU serial")
	list.Flags().IntVar(&lLimit, "limit", 0, "one page of at most this many records")
	cmd.AddCommand(list)

	cmd.AddCommand(&cobra.Command{
		Use: "show ID|BMC_MAC", Short: "Show one ExpectedMachine", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if _, err := c.call("GET", base+"/"+esc(args[0]), nil, "", nil, &raw); err != nil {
				return err
			}
			return emOut(c, raw)
		},
	})

	addF := &emFlags{}
	add := &cobra.Command{
		Use: "add --bmc-mac MAC [--expected-dpu SERIAL[,ipv4=A][,ipv6=B]]… [flags]",
		Example: `  ipledger expected-machine add --bmc-mac 0a:00:00:00:09:01 --name r09-u01 --expected-dpu MT2309X00011,ipv4=10.180.62.240
  # NICo's admin-CLI spelling works too:
  ipledger expected-machine add -a 0a:00:00:00:09:01 -u root -p secret -s CHS-1 -d MT2309X00011 \
    --meta-name r09-u01 --label rack:r09 --sku-id sku-7 \
    --dpu-loopback-reservations '[{"dpu_serial_number":"MT2309X00011","loopback_ipv4":"10.180.62.240"}]'`,
		Short: "Create an ExpectedMachine (operator)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			if err := addF.resolve(cmd); err != nil {
				return err
			}
			if addF.mac == "" {
				return fmt.Errorf("--bmc-mac (or -a/--bmc-mac-address) is required")
			}
			pw, set, err := addF.passwordValue()
			if err != nil {
				return err
			}
			labels, err := addF.labelList()
			if err != nil {
				return err
			}
			dpus, err := addF.expectedDPUs()
			if err != nil {
				return err
			}
			spec := allocator.ExpectedMachineSpec{BmcMacAddress: addF.mac, BmcUsername: addF.username, ChassisSerialNumber: addF.chassis,
				FallbackDPUSerialNumbers: append([]string{}, addF.fallback...), ExpectedDPUs: &dpus,
				Metadata: &allocator.Metadata{Name: addF.name, Description: addF.description, Labels: labels}}
			if set {
				spec.BmcPassword = &pw
			}
			if addF.sku != "" {
				spec.SkuID = &addF.sku
			}
			var raw json.RawMessage
			if _, err := c.call("POST", base, spec, "", nil, &raw); err != nil {
				return err
			}
			return emOut(c, raw)
		},
	}
	addF.register(add, false)
	cmd.AddCommand(add)

	// patchWith sends the merge patch of the field flags given; the record
	// is ID|BMC_MAC, or the -a/--bmc-mac-address of NICo's CLI when no
	// argument is given.
	patchWith := func(cmd *cobra.Command, args []string, f *emFlags) error {
		c, err := cf.client(cmd.OutOrStdout())
		if err != nil {
			return err
		}
		if err := f.resolve(cmd); err != nil {
			return err
		}
		target, byMAC := "", false
		switch {
		case len(args) == 1:
			target = args[0]
		case cmd.Flags().Changed("bmc-mac-address"):
			target, byMAC = f.mac, true
		default:
			return fmt.Errorf("which ExpectedMachine? give ID|BMC_MAC or -a/--bmc-mac-address")
		}
		body, err := f.patchBody(byMAC)
		if err != nil {
			return err
		}
		var raw json.RawMessage
		if _, err := c.call("PATCH", base+"/"+esc(target), body, "application/merge-patch+json", ifMatchHeader(f.ifMatch), &raw); err != nil {
			return err
		}
		return emOut(c, raw)
	}

	patchF := &emFlags{}
	patch := &cobra.Command{
		Use:   "patch ID|BMC_MAC [flags]",
		Short: "Change the given fields of an ExpectedMachine (operator); omitted flags keep their value", Args: cobra.MaximumNArgs(1),
		Example: `  ipledger expected-machine patch 0a:00:00:00:09:01 --sku-id sku-8      # reservations and password kept
  ipledger expected-machine patch -a 0a:00:00:00:09:01 --dpu-loopback-reservations '[]'   # clears them`,
		RunE: func(cmd *cobra.Command, args []string) error { return patchWith(cmd, args, patchF) },
	}
	patchF.register(patch, true)
	cmd.AddCommand(patch)

	var uFile string
	updF := &emFlags{}
	update := &cobra.Command{
		Use: "update ID|BMC_MAC (-f FILE | [flags])",
		Short: "Replace an ExpectedMachine with a JSON record (-f: PUT; absent expected_dpus and bmc_password keep the stored ones), " +
			"or change the fields given as flags (as patch)",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if uFile == "" {
				return patchWith(cmd, args, updF)
			}
			for _, name := range []string{"bmc-mac", "bmc-mac-address", "bmc-username", "bmc-password", "bmc-password-file", "chassis-serial",
				"chassis-serial-number", "fallback-dpu-serial", "fallback-dpu-serial-number", "name", "meta-name", "description",
				"meta-description", "label", "sku", "sku-id", "expected-dpu", "dpu-loopback-reservations", "clear-expected-dpus"} {
				if cmd.Flags().Changed(name) {
					return fmt.Errorf("-f FILE replaces the whole record; --%s cannot be combined with it", name)
				}
			}
			if len(args) != 1 {
				return fmt.Errorf("update -f FILE needs the record: ID|BMC_MAC")
			}
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			data, err := readJSONFile(uFile)
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if _, err := c.call("PUT", base+"/"+esc(args[0]), data, "application/json", ifMatchHeader(updF.ifMatch), &raw); err != nil {
				return err
			}
			return emOut(c, raw)
		},
	}
	update.Flags().StringVarP(&uFile, "file", "f", "", "JSON record (- for stdin)")
	updF.register(update, true)
	cmd.AddCommand(update)

	var confirm bool
	erase := &cobra.Command{
		Use:   "erase --confirm",
		Short: "Delete every ExpectedMachine and its reservations (admin); active DPUs keep their values", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !confirm {
				return fmt.Errorf("erase deletes every ExpectedMachine and every loopback reservation; add --confirm to do it")
			}
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			if _, err := c.call("DELETE", base, nil, "", nil, nil); err != nil {
				return err
			}
			if !c.json {
				fmt.Fprintln(c.out, "deleted every ExpectedMachine")
			}
			return nil
		},
	}
	erase.Flags().BoolVar(&confirm, "confirm", false, "really delete every ExpectedMachine")
	cmd.AddCommand(erase)

	var dIfMatch int64
	del := &cobra.Command{
		Use: "delete ID|BMC_MAC", Short: "Delete an ExpectedMachine and its reservations (operator)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			if _, err := c.call("DELETE", base+"/"+esc(args[0]), nil, "", ifMatchHeader(dIfMatch), nil); err != nil {
				return err
			}
			if !c.json {
				fmt.Fprintf(c.out, "deleted %s\n", args[0])
			}
			return nil
		},
	}
	del.Flags().Int64Var(&dIfMatch, "if-match", 0, "only delete the record if it is still at this version (412 otherwise)")
	cmd.AddCommand(del)

	var rFile string
	replaceAll := &cobra.Command{
		Use:   "replace-all -f FILE",
		Short: `Make the ExpectedMachines exactly those of a NICo file {"expected_machines":[...]}, atomically (operator)`, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			data, err := readJSONFile(rFile)
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if _, err := c.call("PUT", base, data, "application/json", nil, &raw); err != nil {
				return err
			}
			if c.json {
				return c.printJSON(raw)
			}
			var res struct {
				Items []allocator.ExpectedMachine `json:"items"`
			}
			if err := json.Unmarshal(raw, &res); err != nil {
				return err
			}
			printExpectedMachines(c, res.Items)
			fmt.Fprintf(c.out, "%d ExpectedMachines stored\n", len(res.Items))
			return nil
		},
	}
	replaceAll.Flags().StringVarP(&rFile, "file", "f", "", "NICo expected-machines JSON file (- for stdin)")
	cmd.AddCommand(replaceAll)
	return cmd
}
