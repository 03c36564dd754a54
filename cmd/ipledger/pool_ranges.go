package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ipledger/ipledger/allocator"
)

// newPoolAddRangeCmd is `pool add-range`: grow a pool by an inclusive range.
func newPoolAddRangeCmd(cf *clientFlags) *cobra.Command {
	var explicit bool
	addRange := &cobra.Command{
		Use: "add-range POOL FIRST LAST", Short: "Grow a pool by an inclusive range (admin)", Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.OutOrStdout())
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
	return addRange
}

// newPoolSetRangeCmd is `pool set-range`: shrink, move or flip a range.
func newPoolSetRangeCmd(cf *clientFlags) *cobra.Command {
	var flip string
	setRange := &cobra.Command{
		Use: "set-range POOL RANGE_ID [--first F] [--last L] [--auto-assign true|false]", Short: "Shrink, move or flip a range (admin)", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.OutOrStdout())
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
	return setRange
}

// newPoolRemoveRangeCmd is `pool remove-range`: remove an empty range.
func newPoolRemoveRangeCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use: "remove-range POOL RANGE_ID", Short: "Remove an empty range (admin)", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			if _, err = c.call("DELETE", "/api/v1/pools/"+esc(args[0])+"/ranges/"+esc(args[1]), nil, "", nil, nil); err != nil {
				return err
			}
			if !c.json {
				fmt.Fprintf(c.out, "removed range %s of pool %s\n", args[1], args[0])
			}
			return nil
		},
	}
}
