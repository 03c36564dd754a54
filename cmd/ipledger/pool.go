package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ipledger/ipledger/allocator"
)

func newPoolCmd(cf *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "pool", Short: "Resource pools, ranges and allocations"}

	cmd.AddCommand(&cobra.Command{
		Use: "list", Short: "List pools with utilization", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
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
			table([]string{"NAME", "TYPE", "RANGES", "AUTO SIZE", "AUTO USED", "EXPLICIT SIZE", "EXPLICIT USED", "RESERVED", "QUARANTINED", "USED"}, rows)
			return nil
		},
	})

	cmd.AddCommand(&cobra.Command{
		Use: "show NAME", Short: "Show a pool with its ranges and stats", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var p allocator.Pool
			if printed, err := c.get("/api/v1/pools/"+esc(args[0]), &p); err != nil || printed {
				return err
			}
			fmt.Printf("pool %s (%s)", p.Name, p.Type)
			if p.DelegatePrefixLen > 0 {
				fmt.Printf(", delegate_prefix_len %d", p.DelegatePrefixLen)
			}
			if p.Gateway != "" {
				fmt.Printf(", gateway %s", p.Gateway)
			}
			fmt.Println()
			var rows [][]string
			for _, r := range p.Ranges {
				rows = append(rows, []string{r.ID, r.First, r.Last, fmt.Sprint(r.AutoAssign), r.Size, r.Stats.Allocated, r.Stats.Quarantined, r.Stats.Reserved, r.Stats.Free})
			}
			table([]string{"RANGE", "FIRST", "LAST", "AUTO_ASSIGN", "SIZE", "ALLOCATED", "QUARANTINED", "RESERVED", "FREE"}, rows)
			return nil
		},
	})

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
			c, err := cf.client()
			if err != nil {
				return err
			}
			var body any
			if file != "" {
				data, err := os.ReadFile(file)
				if err != nil {
					return err
				}
				body = json.RawMessage(data)
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
				return printJSON(raw)
			}
			var p allocator.Pool
			if err := json.Unmarshal(raw, &p); err != nil {
				return err
			}
			fmt.Printf("created pool %s (%s) with %d range(s)\n", p.Name, p.Type, len(p.Ranges))
			for _, r := range p.Ranges {
				fmt.Printf("  range %s: %s..%s auto_assign=%t, %s values\n", r.ID, r.First, r.Last, r.AutoAssign, r.Size)
			}
			return nil
		},
	}
	create.Flags().StringVar(&ptype, "type", "", "ipv4, ipv6, ipv6prefix or integer")
	create.Flags().IntVar(&plen, "delegate-prefix-len", 0, "block length of an ipv6prefix pool")
	create.Flags().StringVar(&gateway, "gateway", "", "gateway rendered into CNI configs")
	create.Flags().StringArrayVar(&ranges, "range", nil, "FIRST-LAST[,auto_assign=false] (repeatable; inclusive)")
	create.Flags().StringVarP(&file, "file", "f", "", "JSON pool spec file")
	cmd.AddCommand(create)

	cmd.AddCommand(&cobra.Command{
		Use: "load FILE", Short: "Load a NICo pool file additively (admin); prints created ranges and drift", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
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
				return printJSON(raw)
			}
			var res allocator.LoadResult
			if err := json.Unmarshal(raw, &res); err != nil {
				return err
			}
			for _, r := range res.Created {
				fmt.Printf("created %s %s..%s\n", r.Pool, r.First, r.Last)
			}
			for _, d := range res.Drift {
				fmt.Printf("DRIFT %s: %s\n", d.Pool, d.Message)
			}
			if len(res.Created) == 0 && len(res.Drift) == 0 {
				fmt.Println("nothing to do: every pool and range is already there")
			}
			return nil
		},
	})

	var explicit bool
	addRange := &cobra.Command{
		Use: "add-range POOL FIRST LAST", Short: "Grow a pool by an inclusive range (admin)", Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			auto := !explicit
			var raw json.RawMessage
			if _, err := c.call("POST", "/api/v1/pools/"+esc(args[0])+"/ranges", allocator.RangeSpec{First: args[1], Last: args[2], AutoAssign: &auto}, "", nil, &raw); err != nil {
				return err
			}
			return printRange(c, raw, "added")
		},
	}
	addRange.Flags().BoolVar(&explicit, "explicit", false, "auto_assign=false: only explicit requests may take values")
	cmd.AddCommand(addRange)

	var flip string
	setRange := &cobra.Command{
		Use: "set-range POOL RANGE_ID [--first F] [--last L] [--auto-assign true|false]", Short: "Shrink, move or flip a range (admin)", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			u := allocator.RangeUpdate{}
			if f, _ := cmd.Flags().GetString("first"); f != "" {
				u.First = &f
			}
			if l, _ := cmd.Flags().GetString("last"); l != "" {
				u.Last = &l
			}
			if flip != "" {
				b := flip == "true"
				if flip != "true" && flip != "false" {
					return fmt.Errorf("--auto-assign %q: want true or false", flip)
				}
				u.AutoAssign = &b
			}
			var raw json.RawMessage
			if _, err := c.call("PATCH", "/api/v1/pools/"+esc(args[0])+"/ranges/"+esc(args[1]), u, "", nil, &raw); err != nil {
				return err
			}
			return printRange(c, raw, "updated")
		},
	}
	setRange.Flags().String("first", "", "new first value")
	setRange.Flags().String("last", "", "new last value")
	setRange.Flags().StringVar(&flip, "auto-assign", "", "true or false")
	cmd.AddCommand(setRange)

	cmd.AddCommand(&cobra.Command{
		Use: "remove-range POOL RANGE_ID", Short: "Remove an empty range (admin)", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			if _, err = c.call("DELETE", "/api/v1/pools/"+esc(args[0])+"/ranges/"+esc(args[1]), nil, "", nil, nil); err != nil {
				return err
			}
			if !c.json {
				fmt.Printf("removed range %s of pool %s\n", args[1], args[0])
			}
			return nil
		},
	})

	var ownerType, ownerID, value, state string
	var limit int
	alloc := &cobra.Command{
		Use: "allocate POOL --owner-type T --owner-id ID [--value V]", Short: "Allocate a value (lowest free, or the requested one)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var raw json.RawMessage
			body := map[string]string{"owner_type": ownerType, "owner_id": ownerID}
			if value != "" {
				body["value"] = value
			}
			if _, err := c.call("POST", "/api/v1/pools/"+esc(args[0])+"/allocations", body, "", nil, &raw); err != nil {
				return err
			}
			if c.json {
				return printJSON(raw)
			}
			var al allocator.Allocation
			if err := json.Unmarshal(raw, &al); err != nil {
				return err
			}
			fmt.Println(al.Value)
			return nil
		},
	}
	release := &cobra.Command{
		Use: "release POOL VALUE --owner-type T --owner-id ID", Short: "Release a value held by the owner", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			q := url.Values{"owner_type": {ownerType}, "owner_id": {ownerID}}
			_, err = c.call("DELETE", "/api/v1/pools/"+esc(args[0])+"/allocations/"+esc(args[1])+"?"+q.Encode(), nil, "", nil, nil)
			return err
		},
	}
	for _, x := range []*cobra.Command{alloc, release} {
		x.Flags().StringVar(&ownerType, "owner-type", "", "owner type, e.g. machine")
		x.Flags().StringVar(&ownerID, "owner-id", "", "owner id")
		_ = x.MarkFlagRequired("owner-type")
		_ = x.MarkFlagRequired("owner-id")
	}
	alloc.Flags().StringVar(&value, "value", "", "request this exact value (must lie in an auto_assign=false range)")
	cmd.AddCommand(alloc, release)

	cmd.AddCommand(&cobra.Command{
		Use: "unquarantine POOL VALUE", Short: "Return a quarantined value to free (admin)", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if _, err = c.call("POST", "/api/v1/pools/"+esc(args[0])+"/allocations/"+esc(args[1])+":unquarantine", nil, "", nil, &raw); err != nil {
				return err
			}
			if c.json {
				return printJSON(raw)
			}
			fmt.Printf("%s of pool %s is free again\n", args[1], args[0])
			return nil
		},
	})

	allocs := &cobra.Command{
		Use: "allocations POOL", Short: "List a pool's allocations and quarantines (all pages)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			for k, v := range map[string]string{"owner_type": ownerType, "owner_id": ownerID, "state": state} {
				if v != "" {
					q.Set(k, v)
				}
			}
			q.Set("limit", fmt.Sprint(limit))
			var all []allocator.Allocation
			for {
				var page allocator.AllocationPage
				if _, err := c.call("GET", "/api/v1/pools/"+esc(args[0])+"/allocations?"+q.Encode(), nil, "", nil, &page); err != nil {
					return err
				}
				all = append(all, page.Items...)
				if page.NextCursor == "" {
					break
				}
				q.Set("cursor", page.NextCursor)
			}
			if c.json {
				b, _ := json.Marshal(map[string]any{"items": all})
				return printJSON(b)
			}
			var rows [][]string
			for _, a := range all {
				owner := orDash(a.OwnerType) + "/" + orDash(a.OwnerID)
				if a.State == "quarantined" {
					owner = "(was " + orDash(a.FormerOwnerType) + "/" + orDash(a.FormerOwnerID) + ": " + orDash(a.QuarantineReason) + ")"
				}
				rows = append(rows, []string{a.Value, a.State, owner, a.AllocatedAt.Format("2006-01-02T15:04:05Z")})
			}
			table([]string{"VALUE", "STATE", "OWNER", "SINCE"}, rows)
			return nil
		},
	}
	allocs.Flags().StringVar(&ownerType, "owner-type", "", "filter by owner type")
	allocs.Flags().StringVar(&ownerID, "owner-id", "", "filter by owner id")
	allocs.Flags().StringVar(&state, "state", "", "allocated or quarantined")
	allocs.Flags().IntVar(&limit, "page-size", 1000, "page size")
	cmd.AddCommand(allocs)
	return cmd
}

// printRange prints a range answer: JSON for scripts, a line for people.
func printRange(c *client, raw json.RawMessage, verb string) error {
	if c.json {
		return printJSON(raw)
	}
	var r allocator.Range
	if err := json.Unmarshal(raw, &r); err != nil {
		return err
	}
	fmt.Printf("%s range %s: %s..%s auto_assign=%t, %s values (%s allocated, %s free)\n",
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
	var x, y int64
	fmt.Sscan(a, &x)
	fmt.Sscan(b, &y)
	return fmt.Sprint(x + y)
}

func newEventsCmd(cf *clientFlags) *cobra.Command {
	var objectType, objectID, action string
	var limit int
	cmd := &cobra.Command{
		Use: "events", Short: "Show the audit log, newest first", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			q := url.Values{"limit": {fmt.Sprint(limit)}}
			if objectType != "" {
				q.Set("object_type", objectType)
			}
			if objectID != "" {
				q.Set("object_id", objectID)
			}
			if action != "" {
				q.Set("action", action)
			}
			var page allocator.EventPage
			if printed, err := c.get("/api/v1/events?"+q.Encode(), &page); err != nil || printed {
				return err
			}
			var rows [][]string
			for _, e := range page.Items {
				rows = append(rows, []string{e.At.Format("2006-01-02T15:04:05Z"), e.Actor, e.Action, e.ObjectType + " " + e.ObjectID, e.RequestID})
			}
			table([]string{"TIME", "ACTOR", "ACTION", "OBJECT", "REQUEST"}, rows)
			return nil
		},
	}
	cmd.Flags().StringVar(&objectType, "object-type", "", "filter: pool, allocation, expected_machine, machine, token")
	cmd.Flags().StringVar(&objectID, "object-id", "", "filter by object id")
	cmd.Flags().StringVar(&action, "action", "", "filter by action (a prefix ending in '.' matches a family)")
	cmd.Flags().IntVar(&limit, "limit", 50, "how many events")
	return cmd
}

func newAddressCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use: "address VALUE", Short: "Show every pool entry, allocation, quarantine and reservation that holds a value", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var info allocator.AddressInfo
			if printed, err := c.get("/api/v1/addresses/"+esc(args[0]), &info); err != nil || printed {
				return err
			}
			if len(info.Entries) == 0 {
				fmt.Printf("%s: held by nothing\n", info.Value)
				return nil
			}
			var rows [][]string
			for _, e := range info.Entries {
				detail := ""
				switch e.Kind {
				case "pool_member":
					detail = fmt.Sprintf("range %s auto_assign=%v", e.RangeID, e.AutoAssign != nil && *e.AutoAssign)
				case "allocation":
					detail = orDash(e.OwnerType) + "/" + orDash(e.OwnerID)
				case "quarantine":
					detail = "was " + orDash(e.FormerOwnerType) + "/" + orDash(e.FormerOwnerID) + ": " + orDash(e.QuarantineReason)
				case "reservation":
					detail = "DPU " + e.SerialNumber + " of ExpectedMachine " + e.ExpectedMachineID
				}
				rows = append(rows, []string{e.Pool, e.Kind, e.Value, detail})
			}
			table([]string{"POOL", "KIND", "VALUE", "DETAIL"}, rows)
			return nil
		},
	}
}
