package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"gorm.io/gorm"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

// openExistingDatabase opens the database of cmd's settings (--database,
// IPLEDGER_DATABASE_URL) like openDatabase, but refuses a SQLite URL naming
// no file (a typo would otherwise create an empty database).
func openExistingDatabase(cmd *cobra.Command) (*gorm.DB, func(), error) {
	c, err := loadConfig(cmd.Flags(), os.LookupEnv, databaseSettings...)
	if err != nil {
		return nil, nil, err
	}
	if t, err := database.ParseURL(c.DatabaseURL); err == nil && t.Dialect == models.SQLite {
		if _, err := os.Stat(t.Path); err != nil {
			return nil, nil, fmt.Errorf("--database %s: no database file at %s (a typo? run the server or `ipledger migrate` there first)", c.DatabaseURL, t.Path)
		}
	}
	return openDatabase(c)
}

// newTokenListCmd: `ipledger token list` — every token (id, name, role,
// created, live console sessions); never a token value or hash.
func newTokenListCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List API tokens with their live console sessions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			db, closeDB, err := openExistingDatabase(cmd)
			if err != nil {
				return err
			}
			defer closeDB()
			toks, err := auth.New(db, auth.Options{}).ListTokens(context.Background())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if output, _ := cmd.Flags().GetString("output"); output == "json" {
				return writeJSON(out, map[string]any{"items": toks})
			}
			w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tNAME\tROLE\tCREATED\tSESSIONS")
			for _, t := range toks {
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\n", t.ID, t.Name, t.Role, t.CreatedAt.UTC().Format(time.RFC3339), t.Sessions)
			}
			return w.Flush()
		},
	}
	bindFlags(cmd.Flags(), databaseSettings...)
	return cmd
}

// newTokenDeleteCmd: `ipledger token delete --name N | --id ID` — deletes
// the token and ends its console sessions at once (auth.Service.DeleteToken).
func newTokenDeleteCmd() *cobra.Command {
	var name string
	var id int64
	cmd := &cobra.Command{
		Use:   "delete",
		Short: "Delete a token (by --name or --id); its API calls and console sessions stop at once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (name == "") == (id == 0) {
				return fmt.Errorf("give exactly one of --name or --id")
			}
			if id < 0 {
				return fmt.Errorf("--id %d: want a positive token id", id)
			}
			db, closeDB, err := openExistingDatabase(cmd)
			if err != nil {
				return err
			}
			defer closeDB()
			t, err := auth.New(db, auth.Options{}).DeleteToken(audit.WithActor(context.Background(), "cli:token-delete", ""), id, name)
			if err != nil {
				if e, ok := fault.AsError(err); ok && e.Field != "" {
					return fmt.Errorf("--%s: %s", e.Field, e.Message)
				}
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted token %s (id %s, %s) and its console sessions\n", t.Name, strconv.FormatInt(t.ID, 10), t.Role)
			return nil
		},
	}
	bindFlags(cmd.Flags(), databaseSettings...)
	cmd.Flags().StringVar(&name, "name", "", "name of the token to delete")
	cmd.Flags().Int64Var(&id, "id", 0, "id of the token to delete (see `ipledger token list`)")
	return cmd
}
