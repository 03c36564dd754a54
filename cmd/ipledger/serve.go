package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/buildinfo"
	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/feed"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/poolfile"
	"github.com/ipledger/ipledger/web"
	"github.com/ipledger/ipledger/webhook"
)

func newLogger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// openDatabase opens and migrates the database of c and returns its
// handle: the process builds the allocator and the services over it.
func openDatabase(c config) (*gorm.DB, func(), error) {
	t, err := database.ParseURL(c.DatabaseURL)
	if err != nil {
		return nil, nil, err
	}
	release := func() {}
	if t.Dialect == models.SQLite {
		// Held while the process runs: a restore refuses to replace the
		// file under a server (docs/operations.md
		// "SQLite: `ipledger backup` while the server runs").
		if release, err = database.HoldSQLite(t.Path); err != nil {
			return nil, nil, err
		}
	}
	db, _, err := database.OpenWith(c.DatabaseURL, database.OpenOptions{MaxConns: c.DBMaxConns})
	if err != nil {
		release()
		return nil, nil, err
	}
	if err := models.Migrate(db); err != nil {
		release()
		return nil, nil, err
	}
	closeFn := func() {
		if s, err := db.DB(); err == nil {
			s.Close()
		}
		release()
	}
	return db, closeFn, nil
}

// newAllocator is the allocator over db with c's settings and opts's hooks
// (serve's metrics).
func newAllocator(c config, db *gorm.DB, opts allocator.Options) *allocator.Allocator {
	opts.QuarantineHold, opts.Logger = c.QuarantineHold, slog.Default()
	return allocator.New(db, opts)
}

// storedProblems lists what an older database holds against rules that
// are newer than its data: address pools that overlap, token names
// shared by several tokens and DPU serial numbers declared in several
// cases; and, on PostgreSQL without pg_trgm, that the
// console's search for part of a text scans the fleet
// (database.SearchIndexStatus). Nothing is changed; each line says how to
// fix it. The start-up log and `ipledger migrate` print them.
func storedProblems(ctx context.Context, a *allocator.Allocator, db *gorm.DB) []string {
	var out []string
	ov, err := a.CheckPools(ctx)
	if err != nil {
		out = append(out, "cannot check address pools for overlaps: "+err.Error())
	}
	for _, o := range ov {
		out = append(out, "address pools overlap: "+o.Message()+"; shrink or remove one (`ipledger pool check` lists them all)")
	}
	names, err := auth.TokenNameDuplicates(ctx, db)
	if err != nil {
		out = append(out, "cannot check token names: "+err.Error())
	}
	for _, n := range names {
		out = append(out, fmt.Sprintf("several tokens are named %q: the audit actor token:%s names none of them alone; delete the extra ones by id (`ipledger token list`, `ipledger token delete --id N`)", n, n))
	}
	serials, err := a.SerialCaseDuplicates(ctx)
	if err != nil {
		out = append(out, "cannot check DPU serial numbers: "+err.Error())
	}
	for _, s := range serials {
		out = append(out, s+": ingestion matches the DPU's serial exactly, so keep one spelling and remove the others (`ipledger expected-machine` or the console)")
	}
	if st, err := database.SearchIndexStatus(db.WithContext(ctx)); err != nil {
		out = append(out, "cannot read the search indexes: "+err.Error())
	} else if st != "" {
		out = append(out, st)
	}
	return out
}

func newServeCmd() *cobra.Command {
	var demo bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the REST API and the operator console",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd.Flags(), os.LookupEnv, serveSettings...)
			if err != nil {
				return err
			}
			if err := cfg.checkIdentity(); err != nil {
				return err
			}
			log := newLogger(cfg.LogLevel)
			slog.SetDefault(log)
			for _, k := range unknownVariables(os.Environ()) {
				log.Warn("unknown setting ignored (a typo? see the README's settings table)", "variable", k)
			}
			setMemoryLimit(log)
			metrics := web.NewMetrics(nil)
			// Every writer wakes the change feed after its commit; the
			// feed is made once the database is open, before any write.
			var fd *feed.Feed
			db, closeDB, err := openDatabase(cfg)
			if err != nil {
				return err
			}
			defer closeDB()
			a := newAllocator(cfg, db, metrics.AllocatorOptions(allocator.Options{OnCommit: func() { fd.Committed() }}))
			fd = feed.New(db, feed.Options{Logger: log})
			hooks := webhook.New(db, webhook.Options{Logger: log, OnCommit: fd.Committed})
			fd.SetDeliveries(hooks)
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			ctx = audit.WithActor(ctx, "system:startup", "")
			au := auth.New(db, auth.Options{Logger: log, OnCommit: fd.Committed})
			if err := bootstrapAdmin(ctx, au, cmd, cfg.AdminToken); err != nil {
				return err
			}
			if pools := cfg.PoolFile; pools != "" {
				data, err := os.ReadFile(pools)
				if err != nil {
					return fmt.Errorf("--pools: %w", err)
				}
				res, err := poolfile.Load(ctx, a, data)
				if err != nil {
					return fmt.Errorf("--pools %s: %w", pools, err)
				}
				log.Info("pool file loaded", "file", pools, "created_ranges", len(res.Created), "drift", len(res.Drift))
				for _, d := range res.Drift {
					log.Warn("pool file drift", "pool", d.Pool, "message", d.Message)
				}
			}
			if demo {
				if err := seedDemo(ctx, a, log); err != nil {
					return fmt.Errorf("--demo: %w", err)
				}
			}
			for _, line := range storedProblems(ctx, a, db) {
				log.Warn(line)
			}
			if err := reconcileAtStartup(ctx, a, log, cfg.ReconcileInterval); err != nil {
				log.Error("startup step failed", "error", err)
			}
			if cfg.DebugListen != "" {
				startDebugListener(cfg.DebugListen, log)
			}
			au.ListenForTokenChanges(ctx)
			ident, tlsFiles, err := identityOf(cfg, log)
			if err != nil {
				return err
			}
			srv := web.New(web.Config{Allocator: a, DB: db, Auth: au, Feed: fd, Webhooks: hooks, Metrics: metrics, Logger: log, SecureCookies: cfg.secureCookies() || tlsFiles != nil,
				Identity: ident, TLS: tlsFiles})
			// The change feed's sequencer and the webhook deliveries
			// (docs/feed.md) run in every server process; they share the
			// work through the database.
			feedDone := fd.RunFeed(ctx, feed.FeedOptions{})
			hooksDone := hooks.Run(ctx, webhook.WebhookOptions{})
			err = srv.Serve(ctx, cfg.Listen, func(addr string) {
				scheme := "http://"
				if tlsFiles != nil {
					scheme = "https://"
				}
				bi := buildinfo.Get()
				log.Info("ipledger listening", "addr", addr, "console", scheme+addr+"/", "database", redactURL(cfg.DatabaseURL),
					"version", bi.Version, "commit", bi.Commit)
			})
			stop()
			<-feedDone
			<-hooksDone
			log.Info("ipledger stopped")
			return err
		},
	}
	bindFlags(cmd.Flags(), serveSettings...)
	cmd.Flags().BoolVar(&demo, "demo", false, "load a small demo site when the database is empty")
	return cmd
}

// startDebugListener serves Go's runtime profiles (/debug/pprof/…) on a
// listener of its own, so that profiling needs no token and is never
// reachable through the API's address. The profiles reveal no pool data
// but do cost CPU while taken: operators bind it to loopback.
func startDebugListener(addr string, log *slog.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		log.Info("debug listener (pprof)", "addr", addr)
		if err := srv.ListenAndServe(); err != nil {
			log.Error("debug listener stopped", "addr", addr, "error", err)
		}
	}()
}

func bootstrapAdmin(ctx context.Context, a *auth.Service, cmd *cobra.Command, tok string) error {
	if tok != "" {
		_, err := a.EnsureAdminToken(ctx, tok)
		return err
	}
	has, err := a.HasAdminToken(ctx)
	if err != nil || has {
		return err
	}
	tok, err = a.CreateToken(ctx, "first-admin", auth.RoleAdmin, "")
	if err != nil {
		return err
	}
	// One line, the token last: `grep 'First admin token'` in a log
	// (the Helm chart's install notes) finds the token with its name.
	fmt.Fprintf(cmd.OutOrStdout(), "First admin token (shown once; sign in to the console or use with --token): %s\n", tok)
	return nil
}

func redactURL(u string) string {
	t, err := database.ParseURL(u)
	if err != nil || t.Dialect == models.SQLite {
		return u
	}
	return "postgres://…"
}

func newMigrateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply database migrations and exit",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := loadConfig(cmd.Flags(), os.LookupEnv, databaseSettings...)
			if err != nil {
				return err
			}
			db, _, err := database.OpenWith(c.DatabaseURL, database.OpenOptions{MaxConns: c.DBMaxConns})
			if err != nil {
				return err
			}
			if err := models.Migrate(db); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schema at version %d\n", models.SchemaVersion())
			// What the rules of migration 12 found already broken: kept,
			// reported, for an operator to fix.
			ctx := context.Background()
			a := allocator.New(db, allocator.Options{})
			for _, line := range storedProblems(ctx, a, db) {
				fmt.Fprintln(cmd.OutOrStdout(), "warning: "+line)
			}
			return nil
		},
	}
	bindFlags(cmd.Flags(), databaseSettings...)
	return cmd
}

func newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Manage API tokens (talks to the database directly)"}
	var name, role string
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a token and print it alone on the first line of stdout",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, ok := auth.ParseRole(role)
			if !ok {
				return fmt.Errorf("--role %q: want viewer, operator or admin", role)
			}
			db, closeDB, err := openExistingDatabase(cmd)
			if err != nil {
				return err
			}
			defer closeDB()
			tok, err := auth.New(db, auth.Options{}).CreateToken(audit.WithActor(context.Background(), "cli:token-create", ""), name, r, "")
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok)
			return nil
		},
	}
	bindFlags(create.Flags(), databaseSettings...)
	create.Flags().StringVar(&name, "name", "", "token name (required)")
	create.Flags().StringVar(&role, "role", "viewer", "viewer, operator or admin")
	_ = create.MarkFlagRequired("name")
	cmd.AddCommand(create, newTokenListCmd(), newTokenDeleteCmd())
	return cmd
}
