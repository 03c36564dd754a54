package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ipledger/ipledger/allocator"
)

// newPoolCmd is `ipledger pool`: one function per subcommand, here and in
// pool_ranges.go and pool_allocations.go.
func newPoolCmd(cf *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "pool", Short: "Resource pools, ranges and allocations"}
	cmd.AddCommand(
		newPoolListCmd(cf), newPoolShowCmd(cf), newPoolCreateCmd(cf), newPoolLoadCmd(cf), newPoolCheckCmd(cf),
		newPoolAddRangeCmd(cf), newPoolSetRangeCmd(cf), newPoolRemoveRangeCmd(cf),
		newPoolAllocateCmd(cf), newPoolReleaseCmd(cf), newPoolUnquarantineCmd(cf), newPoolAllocationsCmd(cf),
	)
	return cmd
}

// newPoolCheckCmd is `pool check`: every pair of overlapping address pool
// ranges (kept from before the rule); it exits non-zero when there is one,
// so that a script or a monitoring check notices.
func newPoolCheckCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use: "check", Short: "Report address pools whose ranges overlap (exit status 1 when any do)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if _, err := c.call("GET", "/api/v1/pools:check", nil, "", nil, &raw); err != nil {
				return err
			}
			var body struct {
				Overlaps []allocator.PoolOverlap `json:"overlaps"`
			}
			if err := json.Unmarshal(raw, &body); err != nil {
				return err
			}
			if c.json {
				if err := c.printJSON(raw); err != nil {
					return err
				}
			} else if len(body.Overlaps) == 0 {
				fmt.Fprintln(c.out, "no overlapping address pools")
			} else {
				var rows [][]string
				for _, o := range body.Overlaps {
					rows = append(rows, []string{o.Pool, o.First + ".." + o.Last, o.OtherPool, o.OtherFirst + ".." + o.OtherLast})
				}
				c.table([]string{"POOL", "RANGE", "OVERLAPS POOL", "RANGE"}, rows)
			}
			if len(body.Overlaps) > 0 {
				return fmt.Errorf("%d overlapping range pair(s): shrink or remove one range of each pair", len(body.Overlaps))
			}
			return nil
		},
	}
}

// newPoolListCmd is `pool list`: every pool with its utilization.
func newPoolListCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use: "list", Short: "List pools with utilization", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			var body struct{ Items []allocator.Pool }
			if printed, err := c.get("/api/v1/pools", &body); err != nil || printed {
				return err
			}
			var rows [][]string
			for _, p := range body.Items {
				rows = append(rows, []string{p.Name, string(p.Type), fmt.Sprint(len(p.Ranges)),
					p.Stats.Auto.Size, p.Stats.Auto.Allocated, p.Stats.Explicit.Size, p.Stats.Explicit.Allocated,
					p.Stats.Explicit.Reserved, sum(p.Stats.Auto.Quarantined, p.Stats.Explicit.Quarantined), fmt.Sprintf("%.1f%%", 100*p.Stats.Used())})
			}
			c.table([]string{"NAME", "TYPE", "RANGES", "AUTO SIZE", "AUTO USED", "EXPLICIT SIZE", "EXPLICIT USED", "RESERVED", "QUARANTINED", "USED"}, rows)
			return nil
		},
	}
}

// newPoolShowCmd is `pool show NAME`: one pool with its ranges and stats.
func newPoolShowCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use: "show NAME", Short: "Show a pool with its ranges and stats", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			var p allocator.Pool
			if printed, err := c.get("/api/v1/pools/"+esc(args[0]), &p); err != nil || printed {
				return err
			}
			fmt.Fprintf(c.out, "pool %s (%s)", p.Name, p.Type)
			if p.DelegatePrefixLen > 0 {
				fmt.Fprintf(c.out, ", delegate_prefix_len %d", p.DelegatePrefixLen)
			}
			if p.Gateway != "" {
				fmt.Fprintf(c.out, ", gateway %s", p.Gateway)
			}
			fmt.Fprintln(c.out)
			var rows [][]string
			for _, r := range p.Ranges {
				rows = append(rows, []string{r.ID, r.First, r.Last, fmt.Sprint(r.AutoAssign), r.Size, r.Stats.Allocated, r.Stats.Quarantined, r.Stats.Reserved, r.Stats.Free})
			}
			c.table([]string{"RANGE", "FIRST", "LAST", "AUTO_ASSIGN", "SIZE", "ALLOCATED", "QUARANTINED", "RESERVED", "FREE"}, rows)
			return nil
		},
	}
}

// newPoolCreateCmd is `pool create`, from flags or a JSON spec file.
func newPoolCreateCmd(cf *clientFlags) *cobra.Command {
	var (
		ptype, gateway string
		plen           int
		ranges         []string
		file           string
	)
	create := &cobra.Command{
		Use:   "create NAME --type TYPE --range FIRST-LAST[,auto_assign=false] …  |  create -f POOL.json",
		Short: "Create a pool (admin); ranges are inclusive first..last",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			var body any
			if file != "" {
				data, err := readJSONFile(file)
				if err != nil {
					return err
				}
				body = data
			} else {
				if len(args) != 1 {
					return fmt.Errorf("pool create needs NAME (or -f FILE)")
				}
				spec := allocator.PoolSpec{Name: args[0], Type: ptype, DelegatePrefixLen: plen, Gateway: gateway}
				for _, r := range ranges {
					rs, err := parseRangeFlag(r)
					if err != nil {
						return err
					}
					spec.Ranges = append(spec.Ranges, rs)
				}
				body = spec
			}
			var raw json.RawMessage
			if _, err := c.call("POST", "/api/v1/pools", body, "application/json", nil, &raw); err != nil {
				return err
			}
			if c.json {
				return c.printJSON(raw)
			}
			var p allocator.Pool
			if err := json.Unmarshal(raw, &p); err != nil {
				return err
			}
			ranges := "ranges"
			if len(p.Ranges) == 1 {
				ranges = "range"
			}
			fmt.Fprintf(c.out, "created pool %s (%s) with %d %s\n", p.Name, p.Type, len(p.Ranges), ranges)
			for _, r := range p.Ranges {
				fmt.Fprintf(c.out, "  range %s: %s..%s auto_assign=%t, %s values\n", r.ID, r.First, r.Last, r.AutoAssign, r.Size)
			}
			return nil
		},
	}
	create.Flags().StringVar(&ptype, "type", "", "ipv4, ipv6, ipv6prefix or integer")
	create.Flags().IntVar(&plen, "delegate-prefix-len", 0, "block length of an ipv6prefix pool")
	create.Flags().StringVar(&gateway, "gateway", "", "gateway rendered into CNI configs")
	create.Flags().StringArrayVar(&ranges, "range", nil, "FIRST-LAST[,auto_assign=false] (repeatable; inclusive)")
	create.Flags().StringVarP(&file, "file", "f", "", "JSON pool spec file")
	return create
}

// newPoolLoadCmd is `pool load FILE`: a NICo pool file, loaded additively.
func newPoolLoadCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use: "load FILE", Short: "Load a NICo pool file additively (admin); prints created ranges and drift", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			data, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if _, err := c.call("POST", "/api/v1/pools:load", data, "application/toml", nil, &raw); err != nil {
				return err
			}
			if c.json {
				return c.printJSON(raw)
			}
			var res allocator.LoadResult
			if err := json.Unmarshal(raw, &res); err != nil {
				return err
			}
			for _, r := range res.Created {
				fmt.Fprintf(c.out, "created %s %s..%s\n", r.Pool, r.First, r.Last)
			}
			for _, d := range res.Drift {
				fmt.Fprintf(c.out, "DRIFT %s: %s\n", d.Pool, d.Message)
			}
			if len(res.Created) == 0 && len(res.Drift) == 0 {
				fmt.Fprintln(c.out, "nothing to do: every pool and range is already there")
			}
			return nil
		},
	}
}

// printRange prints a range answer: JSON for scripts, a line for people.
func printRange(c *client, raw json.RawMessage, verb string) error {
	if c.json {
		return c.printJSON(raw)
	}
	var r allocator.Range
	if err := json.Unmarshal(raw, &r); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "%s range %s: %s..%s auto_assign=%t, %s values (%s allocated, %s free)\n",
		verb, r.ID, r.First, r.Last, r.AutoAssign, r.Size, r.Stats.Allocated, r.Stats.Free)
	return nil
}

// parseRangeFlag reads FIRST-LAST[,auto_assign=false]. IPv6 values contain
// no '-', so the first '-' splits; ipv6prefix blocks are CIDRs.
func parseRangeFlag(s string) (allocator.RangeSpec, error) {
	parts := strings.Split(s, ",")
	fl := strings.SplitN(parts[0], "-", 2)
	if len(fl) != 2 {
		return allocator.RangeSpec{}, fmt.Errorf("--range %q: want FIRST-LAST[,auto_assign=false]", s)
	}
	rs := allocator.RangeSpec{First: fl[0], Last: fl[1]}
	for _, opt := range parts[1:] {
		switch strings.TrimSpace(opt) {
		case "auto_assign=false", "explicit":
			f := false
			rs.AutoAssign = &f
		case "auto_assign=true":
			t := true
			rs.AutoAssign = &t
		default:
			return allocator.RangeSpec{}, fmt.Errorf("--range %q: unknown option %q", s, opt)
		}
	}
	return rs, nil
}

func sum(a, b string) string {
	x, _ := strconv.ParseInt(a, 10, 64) // counts from the API; a bad one counts 0
	y, _ := strconv.ParseInt(b, 10, 64)
	return fmt.Sprint(x + y)
}
