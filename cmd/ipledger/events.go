package main

import (
	"fmt"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
)

func newEventsCmd(cf *clientFlags) *cobra.Command {
	var objectType, objectID, action string
	var limit int
	cmd := &cobra.Command{
		Use: "events", Short: "Show the audit log, newest first", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(cmd.OutOrStdout())
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
			var page audit.EventPage
			if printed, err := c.get("/api/v1/events?"+q.Encode(), &page); err != nil || printed {
				return err
			}
			var rows [][]string
			for _, e := range page.Items {
				rows = append(rows, []string{e.At.Format("2006-01-02T15:04:05Z"), e.Actor, orDash(&e.ActorRole), e.Action, e.ObjectType + " " + e.ObjectID, e.RequestID})
			}
			c.table([]string{"TIME", "ACTOR", "ROLE", "ACTION", "OBJECT", "REQUEST"}, rows)
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
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			var info allocator.AddressInfo
			if printed, err := c.get("/api/v1/addresses/"+esc(args[0]), &info); err != nil || printed {
				return err
			}
			if len(info.Entries) == 0 {
				fmt.Fprintf(c.out, "%s: held by nothing\n", info.Value)
				return nil
			}
			var rows [][]string
			for _, e := range info.Entries {
				detail := ""
				switch e.Kind {
				case "pool_member":
					detail = fmt.Sprintf("range %s auto_assign=%v", e.RangeID, e.AutoAssign != nil && *e.AutoAssign)
				case "allocation":
					detail = ownerCell(e.OwnerName, e.OwnerType, e.OwnerID)
				case "quarantine":
					detail = "was " + ownerCell(e.OwnerName, e.FormerOwnerType, e.FormerOwnerID) + ": " + orDash(e.QuarantineReason)
				case "reservation":
					detail = "DPU " + e.SerialNumber + " of ExpectedMachine " + e.ExpectedMachineID
				}
				rows = append(rows, []string{e.Pool, e.Kind, e.Value, detail})
			}
			c.table([]string{"POOL", "KIND", "VALUE", "DETAIL"}, rows)
			return nil
		},
	}
}
