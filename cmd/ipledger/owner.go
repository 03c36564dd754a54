package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ipledger/ipledger/allocator"
)

// newOwnerCmd is `ipledger owner`: what one owner holds across pools,
// taken and given back in one request each (docs/api.md "Owner
// allocations").
func newOwnerCmd(cf *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "owner", Short: "An owner's values across pools, allocated or released all at once"}
	cmd.AddCommand(newOwnerAllocateCmd(cf), newOwnerReleaseCmd(cf))
	return cmd
}

// ownerPath is the owner's allocations path.
func ownerPath(ownerType, ownerID string) string {
	return "/api/v1/owners/" + esc(ownerType) + "/" + esc(ownerID) + "/allocations"
}

// ownerPoolEntries turns --pool P and --pool P=VALUE into the entries of
// the request's pools list, in the order given.
func ownerPoolEntries(flags []string) []any {
	out := make([]any, len(flags))
	for i, f := range flags {
		if pool, value, ok := strings.Cut(f, "="); ok {
			out[i] = map[string]string{"pool": pool, "value": value}
		} else {
			out[i] = f
		}
	}
	return out
}

// newOwnerAllocateCmd is `owner allocate`: one value of each pool, all or
// nothing.
func newOwnerAllocateCmd(cf *clientFlags) *cobra.Command {
	var pools []string
	alloc := &cobra.Command{
		Use:   "allocate OWNER_TYPE OWNER_ID --pool P[=VALUE] …",
		Short: "Give an owner one value of each pool, all or nothing (operator)",
		Long: `allocate gives the owner one value of each --pool in one request:
all of them or none. --pool P takes the value the owner already holds in P,
or the lowest free value of P's auto_assign ranges; --pool P=VALUE asks for
that exact value (from an auto_assign=false range). Running it again prints
the same values. A refusal names the entry as pools[i], the i-th --pool
counting from 0, and nothing is allocated.`,
		Example: `  ipledger owner allocate endpoint pod-web-1 --pool pod-v4 --pool endpoint-v6
  ipledger owner allocate endpoint pod-web-1 --pool pod-v4=10.1.0.105 --output json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(pools) == 0 {
				return fmt.Errorf("at least one --pool is required")
			}
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			var raw json.RawMessage
			body := map[string]any{"pools": ownerPoolEntries(pools)}
			if _, err := c.call("POST", ownerPath(args[0], args[1]), body, "", nil, &raw); err != nil {
				return err
			}
			if c.json {
				return c.printJSON(raw)
			}
			var res struct {
				Items []allocator.Allocation `json:"items"`
			}
			if err := json.Unmarshal(raw, &res); err != nil {
				return err
			}
			rows := make([][]string, len(res.Items))
			for i, al := range res.Items {
				rows[i] = []string{al.Pool, al.Value, al.AllocatedAt.Format("2006-01-02T15:04:05Z")}
			}
			c.table([]string{"POOL", "VALUE", "SINCE"}, rows)
			return nil
		},
	}
	alloc.Flags().StringArrayVar(&pools, "pool", nil, "a pool to take a value of (P), or an exact value of it (P=VALUE); repeat for each pool")
	return alloc
}

// newOwnerReleaseCmd is `owner release`: every value the owner holds.
func newOwnerReleaseCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "release OWNER_TYPE OWNER_ID",
		Short: "Release every value an owner holds, in every pool, all at once (operator)",
		Long: `release gives back every value the owner holds, in one request. An owner
that holds nothing is not an error. A DPU's loopbacks are never released
this way: the request is refused naming the DPU, and nothing is released.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			if _, err := c.call("DELETE", ownerPath(args[0], args[1]), nil, "", nil, nil); err != nil {
				return err
			}
			if !c.json {
				fmt.Fprintf(c.out, "%s/%s holds no value now\n", args[0], args[1])
			}
			return nil
		},
	}
}
