package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/ipledger/ipledger/webhook"
	"github.com/spf13/cobra"
)

// newWebhookCmd: ipledger webhook create|list|show|delete|deliveries|redeliver
// (admin; docs/feed.md).
func newWebhookCmd(cf *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "webhook", Short: "Manage webhooks that receive the change feed (admin)"}
	cmd.AddCommand(newWebhookCreateCmd(cf), newWebhookListCmd(cf), newWebhookShowCmd(cf), newWebhookDeleteCmd(cf),
		newWebhookDeliveriesCmd(cf), newWebhookRedeliverCmd(cf))
	return cmd
}

func webhookRows(ws []webhook.Webhook) [][]string {
	var rows [][]string
	for _, w := range ws {
		pools := "(every pool)"
		if w.Pools != nil {
			pools = strings.Join(*w.Pools, ",")
		}
		rows = append(rows, []string{w.ID, w.Name, w.URL, strings.Join(w.Actions, ","), pools, fmt.Sprint(w.Enabled), fmt.Sprint(w.Pending)})
	}
	return rows
}

var webhookHeader = []string{"ID", "NAME", "URL", "ACTIONS", "POOLS", "ENABLED", "PENDING"}

func newWebhookCreateCmd(cf *clientFlags) *cobra.Command {
	var name, target, secretFile string
	var actions, pools []string
	var disabled bool
	cmd := &cobra.Command{
		Use:   "create --name N --url URL --action allocation.* [--pool P]… [--secret-file F]",
		Short: "Create a webhook; the secret comes from IPLEDGER_WEBHOOK_SECRET or --secret-file (never a flag: it would show in ps)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			secret := os.Getenv(webhookSecretVariable)
			if secretFile != "" {
				b, err := os.ReadFile(secretFile)
				if err != nil {
					return fmt.Errorf("--secret-file: %w", err)
				}
				secret = strings.TrimRight(string(b), "\r\n")
			}
			if secret == "" {
				return fmt.Errorf("no secret: set IPLEDGER_WEBHOOK_SECRET or give --secret-file")
			}
			body := map[string]any{"name": name, "url": target, "secret": secret, "actions": actions, "enabled": !disabled}
			if cmd.Flags().Changed("pool") {
				// Sent as given: --pool '' is an empty filter, which the
				// server refuses, not a webhook of every pool.
				body["pools"] = pools
			}
			var w webhook.Webhook
			if _, err := c.call("POST", "/api/v1/webhooks", body, "", nil, &w); err != nil {
				return err
			}
			return printWebhook(c, &w)
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "webhook name")
	cmd.Flags().StringVar(&target, "url", "", "receiver URL (http or https; redirects are not followed)")
	cmd.Flags().StringSliceVar(&actions, "action", nil, "actions to deliver: an action, a prefix such as allocation.*, or * (repeatable)")
	cmd.Flags().StringSliceVar(&pools, "pool", nil, "only events of these pools (repeatable; default every pool and events of none)")
	cmd.Flags().StringVar(&secretFile, "secret-file", "", "file holding the signing secret")
	cmd.Flags().BoolVar(&disabled, "disabled", false, "create it disabled")
	return cmd
}

func printWebhook(c *client, w *webhook.Webhook) error {
	if c.json {
		return printJSONValue(c, w)
	}
	c.table(webhookHeader, webhookRows([]webhook.Webhook{*w}))
	return nil
}

func newWebhookListCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use: "list", Short: "List webhooks", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			var page struct{ Items []webhook.Webhook }
			if printed, err := c.get("/api/v1/webhooks", &page); err != nil || printed {
				return err
			}
			c.table(webhookHeader, webhookRows(page.Items))
			return nil
		},
	}
}

func newWebhookShowCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use: "show ID", Short: "Show one webhook", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			var w webhook.Webhook
			if printed, err := c.get("/api/v1/webhooks/"+esc(args[0]), &w); err != nil || printed {
				return err
			}
			c.table(webhookHeader, webhookRows([]webhook.Webhook{w}))
			return nil
		},
	}
}

func newWebhookDeleteCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use: "delete ID", Short: "Delete a webhook and its queue", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			if _, err := c.call("DELETE", "/api/v1/webhooks/"+esc(args[0]), nil, "", nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(c.out, "webhook %s deleted\n", args[0])
			return nil
		},
	}
}

func newWebhookDeliveriesCmd(cf *clientFlags) *cobra.Command {
	var state string
	var limit int
	cmd := &cobra.Command{
		Use: "deliveries ID", Short: "Show a webhook's delivery log, newest first", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			q := url.Values{"limit": {fmt.Sprint(limit)}}
			if state != "" {
				q.Set("state", state)
			}
			var page webhook.DeliveryPage
			if printed, err := c.get("/api/v1/webhooks/"+esc(args[0])+"/deliveries?"+q.Encode(), &page); err != nil || printed {
				return err
			}
			var rows [][]string
			for _, d := range page.Items {
				code, next := "-", "-"
				if d.StatusCode != nil {
					code = fmt.Sprint(*d.StatusCode)
				}
				if d.NextAttemptAt != nil {
					next = d.NextAttemptAt.Format("2006-01-02T15:04:05Z")
				}
				rows = append(rows, []string{d.DeliveryID, fmt.Sprint(d.Revision), d.Action, d.State, fmt.Sprint(d.Attempts), code, next, d.Error})
			}
			c.table([]string{"DELIVERY", "REVISION", "ACTION", "STATE", "ATTEMPTS", "STATUS", "NEXT ATTEMPT", "ERROR"}, rows)
			return nil
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "pending, delivered or failed")
	cmd.Flags().IntVar(&limit, "limit", 50, "how many deliveries")
	return cmd
}

func newWebhookRedeliverCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use: "redeliver ID DELIVERY", Short: "Send a delivery again (same delivery id)", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			var d webhook.Delivery
			if _, err := c.call("POST", "/api/v1/webhooks/"+esc(args[0])+"/deliveries/"+esc(args[1])+":redeliver", nil, "", nil, &d); err != nil {
				return err
			}
			if c.json {
				return printJSONValue(c, d)
			}
			fmt.Fprintf(c.out, "delivery %s (revision %d) queued again\n", d.DeliveryID, d.Revision)
			return nil
		},
	}
}

// printJSONValue prints v as indented JSON.
func printJSONValue(c *client, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.printJSON(b)
}
