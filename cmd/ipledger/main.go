// Command ipledger is the address authority of a bare-metal site: `ipledger
// serve` runs the REST API and operator console; the other commands are a
// CLI client of that API (README.md).
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}

type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "ipledger",
		Short:         "Address authority of a bare-metal site: resource pools, DPU loopback reservations, allocations",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	cf := &clientFlags{}
	bindFlags(root.PersistentFlags(), clientSettings...)
	root.PersistentFlags().StringVarP(&cf.output, "output", "o", "table", "output format: table or json")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		c, err := loadConfig(cmd.Flags(), os.LookupEnv, clientSettings...)
		cf.server, cf.token = c.ServerURL, c.Token
		cf.caCert, cf.clientCert, cf.clientKey = c.CACert, c.ClientCert, c.ClientKey
		return err
	}
	root.AddCommand(
		newServeCmd(), newMigrateCmd(), newTokenCmd(),
		newBackupCmd(), newRestoreCmd(cf), newCheckCmd(cf),
		newPoolCmd(cf), newEventsCmd(cf), newAddressCmd(cf),
		newExpectedMachineCmd(cf), newMachineCmd(cf), newBindingCmd(cf),
		newWebhookCmd(cf), newOwnerCmd(cf), newCNIIPAMCmd(cf), newVersionCmd(),
	)
	return root
}
