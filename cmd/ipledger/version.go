package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ipledger/ipledger/buildinfo"
)

// newVersionCmd: `ipledger version [--output json]` prints the build's
// version, commit, build date and Go version (package buildinfo). It needs
// neither a server nor a database.
func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, build date and Go version of this build",
		Args:  cobra.NoArgs,
		// No server settings to read: skip the root's client set-up.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		RunE: func(cmd *cobra.Command, _ []string) error {
			in := buildinfo.Get()
			out := cmd.OutOrStdout()
			switch output, _ := cmd.Flags().GetString("output"); output {
			case "json":
				return writeJSON(out, in)
			case "table":
				w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
				fmt.Fprintf(w, "version\t%s\ncommit\t%s\nbuilt\t%s\ngo\t%s\n", in.Version, in.Commit, in.Date, in.GoVersion)
				return w.Flush()
			default:
				return fmt.Errorf("--output %q: want table or json", output)
			}
		},
	}
}
