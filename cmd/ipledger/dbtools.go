package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/dbcheck"
	"github.com/ipledger/ipledger/models"
)

// `ipledger backup`, `restore` and `check` open the database directly
// (docs/operations.md, "Backup, restore and check" and "`ipledger check`").

func newBackupCmd() *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "backup --to FILE",
		Short: "Write an online, consistent copy of the SQLite database to FILE (PostgreSQL: see docs/operations.md)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				return fmt.Errorf("--to: the backup file is required")
			}
			if err := requireDir("--to", to); err != nil {
				return err
			}
			c, err := loadConfig(cmd.Flags(), os.LookupEnv, databaseSettings...)
			if err != nil {
				return err
			}
			if t, err := database.ParseURL(c.DatabaseURL); err != nil {
				return err
			} else if t.Dialect == models.Postgres {
				return database.ErrPostgresBackup
			} else if err := requireSQLiteFile(t); err != nil {
				return err
			}
			db, _, err := database.Open(c.DatabaseURL)
			if err != nil {
				return fmt.Errorf("--database %s: %w", c.DatabaseURL, err)
			}
			defer closeDB(db)
			v, err := database.Backup(cmd.Context(), db, to)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backup written to %s (schema version %d, integrity ok)\n", to, v)
			return nil
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "backup file to write (must not exist)")
	bindFlags(cmd.Flags(), databaseSettings...)
	return cmd
}

func newRestoreCmd(cf *clientFlags) *cobra.Command {
	var from string
	var force bool
	cmd := &cobra.Command{
		Use:   "restore --from FILE",
		Short: "Replace the SQLite database with a backup, then check it (refuses a non-empty database without --force)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" {
				return fmt.Errorf("--from: the backup file is required")
			}
			if _, err := os.Stat(from); err != nil {
				return fmt.Errorf("--from %s: %w", from, err)
			}
			c, err := loadConfig(cmd.Flags(), os.LookupEnv, databaseSettings...)
			if err != nil {
				return err
			}
			t, err := database.ParseURL(c.DatabaseURL)
			if err != nil {
				return err
			}
			if t.Dialect == models.SQLite {
				if err := requireDir("--database", t.Path); err != nil {
					return err
				}
			}
			v, err := database.Restore(from, t, force)
			if errors.Is(err, database.ErrBadBackup) {
				return fmt.Errorf("--from %s: %w", from, err)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored %s into %s (schema version %d)\n", from, t.Path, v)
			if v < models.SchemaVersion() {
				fmt.Fprintf(cmd.OutOrStdout(), "the backup is at schema version %d: `ipledger migrate` or the next start brings it to %d\n", v, models.SchemaVersion())
				return nil
			}
			return runCheck(cmd.Context(), cmd.OutOrStdout(), c.DatabaseURL, cf.output)
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "backup file written by `ipledger backup`")
	cmd.Flags().BoolVar(&force, "force", false, "replace a database that holds tables (stop its server first)")
	bindFlags(cmd.Flags(), databaseSettings...)
	return cmd
}

func newCheckCmd(cf *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check the database's consistency: every storage rule, counters against a recount, run ends, revisions (exit status 1 when anything is wrong)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := loadConfig(cmd.Flags(), os.LookupEnv, databaseSettings...)
			if err != nil {
				return err
			}
			t, err := database.ParseURL(c.DatabaseURL)
			if err != nil {
				return err
			}
			if err := requireSQLiteFile(t); err != nil {
				return err
			}
			return runCheck(cmd.Context(), cmd.OutOrStdout(), c.DatabaseURL, cf.output)
		},
	}
	bindFlags(cmd.Flags(), databaseSettings...)
	return cmd
}

// requireDir refuses a file path whose directory does not exist, naming
// the flag: the error of the write that would follow names a temporary
// file the operator never typed.
func requireDir(flag, path string) error {
	dir := filepath.Dir(path)
	if st, err := os.Stat(dir); err != nil {
		return fmt.Errorf("%s %s: the directory %s: %w", flag, path, dir, errors.Unwrap(err))
	} else if !st.IsDir() {
		return fmt.Errorf("%s %s: %s is not a directory", flag, path, dir)
	}
	return nil
}

// requireSQLiteFile refuses an SQLite database whose file does not exist.
// Opening it would create an empty database (and its -wal and -shm files)
// where an operator mistyped a path, and `backup` or `check` would then
// fail with a confusing message about a missing table, having changed the
// disk.
func requireSQLiteFile(t database.Target) error {
	if t.Dialect != models.SQLite {
		return nil
	}
	if _, err := os.Stat(t.Path); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("--database: sqlite:%s: no such database file", t.Path)
	} else if err != nil {
		return fmt.Errorf("--database: sqlite:%s: %w", t.Path, err)
	}
	return nil
}

// runCheck opens the database without migrating it, checks it and prints
// the result; an error when anything is wrong.
func runCheck(ctx context.Context, out io.Writer, url, output string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	// SQLite's own integrity check first: the rules below read only the
	// rows they need, and would call a file with a damaged index or page
	// elsewhere consistent.
	if t, err := database.ParseURL(url); err == nil && t.Dialect == models.SQLite {
		if err := database.CheckSQLiteIntegrity(t.Path); err != nil {
			return fmt.Errorf("--database sqlite:%s: the file is damaged: %w", t.Path, err)
		}
	}
	db, _, err := database.OpenWith(url, database.OpenOptions{MaxConns: 2})
	if err != nil {
		return err
	}
	defer closeDB(db)
	res, err := dbcheck.Check(ctx, db)
	if err != nil {
		return err
	}
	if output == "json" {
		if err := writeJSON(out, res); err != nil {
			return err
		}
	} else {
		printCheck(out, res)
	}
	if !res.OK() {
		n := len(res.Findings)
		for _, k := range res.Omitted {
			n += k
		}
		return fmt.Errorf("check: %d problem(s) found", n)
	}
	return nil
}

func printCheck(out io.Writer, res *dbcheck.Result) {
	for _, r := range res.Rules {
		status := "ok  "
		if res.Failed(r.Name) {
			status = "FAIL"
		}
		fmt.Fprintf(out, "%s %-20s %s\n", status, r.Name, r.Rule)
		for _, f := range res.Findings {
			if f.Rule == r.Name {
				fmt.Fprintf(out, "       - %s\n", f.Message)
			}
		}
		if n := res.Omitted[r.Name]; n > 0 {
			fmt.Fprintf(out, "       - … and %d more\n", n)
		}
	}
	if res.NotRun != "" {
		fmt.Fprintf(out, "%s\n", res.NotRun)
	}
	for _, n := range res.Notes {
		fmt.Fprintf(out, "note: %s\n", n)
	}
	if res.OK() {
		fmt.Fprintf(out, "%s database: consistent (%d rules)\n", res.Dialect, len(res.Rules))
	}
}

func closeDB(db *gorm.DB) {
	if s, err := db.DB(); err == nil {
		s.Close()
	}
}
