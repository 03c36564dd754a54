package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/ipledger/ipledger/allocator"
)

// newPoolAllocateCmd is `pool allocate`: the lowest free value, or the
// requested one; with --from-file, every allocation of a file in one
// all-or-nothing request.
func newPoolAllocateCmd(cf *clientFlags) *cobra.Command {
	var ownerType, ownerID, value, fromFile string
	alloc := &cobra.Command{
		Use: "allocate POOL (--owner-type T --owner-id ID [--value V] | --from-file FILE)", Short: "Allocate a value (lowest free, or the requested one), or a file of them at once", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			if fromFile != "" {
				if ownerType != "" || ownerID != "" || value != "" {
					return fmt.Errorf("--from-file takes the owners from the file: leave out --owner-type, --owner-id and --value")
				}
				return allocateFromFile(c, args[0], fromFile)
			}
			if ownerType == "" || ownerID == "" {
				return fmt.Errorf("--owner-type and --owner-id are required (or --from-file)")
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
				return c.printJSON(raw)
			}
			var al allocator.Allocation
			if err := json.Unmarshal(raw, &al); err != nil {
				return err
			}
			fmt.Fprintln(c.out, al.Value)
			return nil
		},
	}
	alloc.Flags().StringVar(&ownerType, "owner-type", "", "owner type, e.g. machine")
	alloc.Flags().StringVar(&ownerID, "owner-id", "", "owner id")
	alloc.Flags().StringVar(&value, "value", "", "request this exact value (must lie in an auto_assign=false range)")
	alloc.Flags().StringVar(&fromFile, "from-file", "", `allocate for every owner of a JSON file, all or nothing: {"allocations":[{"owner_type","owner_id","value"?},…]} or the bare list (- for stdin)`)
	return alloc
}

// allocateFromFile sends a file of allocations as one bulk request
// (POST …/allocations:batch) and prints what each owner holds, in file
// order. A bare JSON list is wrapped as {"allocations": list}; anything
// else is sent as it is, for the server to check.
func allocateFromFile(c *client, pool, name string) error {
	data, err := readFileArg(name)
	if err != nil {
		return err
	}
	trimmed := bytes.TrimLeft(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")), " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		data = append(append([]byte(`{"allocations":`), trimmed...), '}')
	}
	var raw json.RawMessage
	if _, err := c.call("POST", "/api/v1/pools/"+esc(pool)+"/allocations:batch", data, "application/json", nil, &raw); err != nil {
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
		rows[i] = []string{al.Value, orDash(al.OwnerType), orDash(al.OwnerID)}
	}
	c.table([]string{"VALUE", "OWNER TYPE", "OWNER ID"}, rows)
	fmt.Fprintf(c.out, "%d allocations held\n", len(res.Items))
	return nil
}

// newPoolReleaseCmd is `pool release`: the owner gives a value back.
func newPoolReleaseCmd(cf *clientFlags) *cobra.Command {
	var ownerType, ownerID string
	release := &cobra.Command{
		Use: "release POOL VALUE --owner-type T --owner-id ID", Short: "Release a value held by the owner", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			q := url.Values{"owner_type": {ownerType}, "owner_id": {ownerID}}
			_, err = c.call("DELETE", "/api/v1/pools/"+esc(args[0])+"/allocations/"+esc(args[1])+"?"+q.Encode(), nil, "", nil, nil)
			return err
		},
	}
	release.Flags().StringVar(&ownerType, "owner-type", "", "owner type, e.g. machine")
	release.Flags().StringVar(&ownerID, "owner-id", "", "owner id")
	_ = release.MarkFlagRequired("owner-type")
	_ = release.MarkFlagRequired("owner-id")
	return release
}

// newPoolUnquarantineCmd is `pool unquarantine`: a quarantined value becomes free.
func newPoolUnquarantineCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use: "unquarantine POOL VALUE", Short: "Return a quarantined value to free (admin)", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if _, err = c.call("POST", "/api/v1/pools/"+esc(args[0])+"/allocations/"+esc(args[1])+":unquarantine", nil, "", nil, &raw); err != nil {
				return err
			}
			if c.json {
				return c.printJSON(raw)
			}
			fmt.Fprintf(c.out, "%s of pool %s is free again\n", args[1], args[0])
			return nil
		},
	}
}

// newPoolAllocationsCmd is `pool allocations`: every page of a pool's allocations.
func newPoolAllocationsCmd(cf *clientFlags) *cobra.Command {
	var ownerType, ownerID, state string
	var limit int
	allocs := &cobra.Command{
		Use: "allocations POOL", Short: "List a pool's allocations and quarantines (all pages)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.OutOrStdout())
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
			all, _, err := listPages[allocator.Allocation](c, "/api/v1/pools/"+esc(args[0])+"/allocations", q, false)
			if err != nil {
				return err
			}
			if c.json {
				b, _ := json.Marshal(map[string]any{"items": all})
				return c.printJSON(b)
			}
			var rows [][]string
			for _, a := range all {
				owner := ownerCell(a.OwnerName, a.OwnerType, a.OwnerID)
				if a.State == "quarantined" {
					owner = "(was " + ownerCell(a.OwnerName, a.FormerOwnerType, a.FormerOwnerID) + ": " + orDash(a.QuarantineReason) + ")"
				}
				rows = append(rows, []string{a.Value, a.State, owner, a.AllocatedAt.Format("2006-01-02T15:04:05Z")})
			}
			c.table([]string{"VALUE", "STATE", "OWNER", "SINCE"}, rows)
			return nil
		},
	}
	allocs.Flags().StringVar(&ownerType, "owner-type", "", "filter by owner type")
	allocs.Flags().StringVar(&ownerID, "owner-id", "", "filter by owner id")
	allocs.Flags().StringVar(&state, "state", "", "allocated or quarantined")
	allocs.Flags().IntVar(&limit, "page-size", 1000, "page size")
	return allocs
}

// ownerCell shows an owner in a table: a machine by the name the server
// gives it, its type/id beside ("DPU MT2242X00001 of host rack7-u12
// (machine/fm100ds…)"), any other owner as type/id.
func ownerCell(name string, typ, id *string) string {
	s := orDash(typ) + "/" + orDash(id)
	if name == "" {
		return s
	}
	return name + " (" + s + ")"
}
