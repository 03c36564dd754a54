package main

import (
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/ipledger/ipledger/models"
)

// config is every setting of ipledger. It is read in one place,
// loadConfig: a flag given on the command line wins over its environment
// variable, which wins over the default. Every setting is a row of
// settings below and of the README's settings table (a test checks both).
type config struct {
	Listen            string
	DatabaseURL       string
	PoolFile          string
	QuarantineHold    time.Duration
	AdminToken        string
	DBMaxConns        int
	DebugListen       string
	LogLevel          slog.Level
	SecureCookies     bool
	ReconcileInterval time.Duration
	ServerURL         string
	Token             string
}

// setting is one row of the settings table: its environment variable, its
// flag ("" when it has none), its default and how a value is read into
// config. set returns what it wants when v is malformed.
type setting struct {
	env, flag, def, usage string
	set                   func(c *config, v string) error
}

var settings = []setting{
	{env: "IPLEDGER_LISTEN", flag: "listen", def: "127.0.0.1:8080", usage: "address to listen on",
		set: func(c *config, v string) error { c.Listen = v; return hostPort(v) }},
	{env: "IPLEDGER_DATABASE_URL", flag: "database", def: models.DefaultURL, usage: "database URL: sqlite:PATH or postgres://…",
		set: func(c *config, v string) error { c.DatabaseURL = v; _, err := models.ParseURL(v); return err }},
	{env: "IPLEDGER_POOLS", flag: "pools", usage: "NICo pool file loaded additively at start",
		set: func(c *config, v string) error { c.PoolFile = v; return nil }},
	{env: "IPLEDGER_QUARANTINE_HOLD", flag: "quarantine-hold", def: "0", usage: "how long a quarantined value is held before it is free again (0: until an admin releases it)",
		set: func(c *config, v string) (err error) {
			c.QuarantineHold, err = duration(v, "720h")
			return err
		}},
	{env: "IPLEDGER_ADMIN_TOKEN", usage: "first admin token (generated and printed once when unset)",
		set: func(c *config, v string) error { c.AdminToken = v; return nil }},
	{env: "IPLEDGER_DB_MAX_CONNS", usage: "database connections per process (0: 32 on PostgreSQL, 4 on SQLite)", def: "0",
		set: func(c *config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return fmt.Errorf("want a number of connections such as 16, or 0 for the default")
			}
			c.DBMaxConns = n
			return nil
		}},
	{env: "IPLEDGER_DEBUG_LISTEN", flag: "debug-listen", usage: "address of a separate listener serving Go's /debug/pprof profiles, unauthenticated: keep it on loopback (off when empty)",
		set: func(c *config, v string) error {
			c.DebugListen = v
			if v == "" {
				return nil
			}
			return hostPort(v)
		}},
	{env: "IPLEDGER_LOG_LEVEL", def: "info", usage: "log level: debug, info, warn or error",
		set: func(c *config, v string) error {
			if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
				return fmt.Errorf("want debug, info, warn or error")
			}
			return nil
		}},
	{env: "IPLEDGER_SECURE_COOKIES", def: "false", usage: "mark console cookies Secure (set it when TLS terminates in front of ipledger)",
		set: func(c *config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("want true or false")
			}
			c.SecureCookies = b
			return nil
		}},
	{env: "IPLEDGER_RECONCILE_INTERVAL", def: "5m", usage: "how often DPUs missing a loopback are completed while the server runs (0: at start only)",
		set: func(c *config, v string) (err error) {
			c.ReconcileInterval, err = duration(v, "5m")
			return err
		}},
	{env: "IPLEDGER_URL", flag: "server", def: "http://127.0.0.1:8080", usage: "ipledger API base URL (client commands)",
		set: func(c *config, v string) error { c.ServerURL = v; return nil }},
	{env: "IPLEDGER_TOKEN", flag: "token", usage: "API bearer token (client commands)",
		set: func(c *config, v string) error { c.Token = v; return nil }},
}

// The settings each kind of command reads.
var (
	serveSettings = []string{"IPLEDGER_LISTEN", "IPLEDGER_DATABASE_URL", "IPLEDGER_POOLS", "IPLEDGER_QUARANTINE_HOLD",
		"IPLEDGER_ADMIN_TOKEN", "IPLEDGER_DB_MAX_CONNS", "IPLEDGER_DEBUG_LISTEN", "IPLEDGER_LOG_LEVEL",
		"IPLEDGER_SECURE_COOKIES", "IPLEDGER_RECONCILE_INTERVAL"}
	databaseSettings = []string{"IPLEDGER_DATABASE_URL", "IPLEDGER_DB_MAX_CONNS"}
	clientSettings   = []string{"IPLEDGER_URL", "IPLEDGER_TOKEN"}
)

// testVariables are read by the tests and tools, not by ipledger: they are
// known, so the server does not warn about them.
var testVariables = []string{"IPLEDGER_TEST_POSTGRES", "IPLEDGER_CHROMIUM", "IPLEDGER_SCREENSHOTS", "IPLEDGER_BENCH_"}

func lookupSetting(env string) setting {
	for _, s := range settings {
		if s.env == env {
			return s
		}
	}
	panic("ipledger: no setting " + env)
}

// bindFlags registers on fs the flags of the named settings that have one.
func bindFlags(fs *pflag.FlagSet, envs ...string) {
	for _, env := range envs {
		s := lookupSetting(env)
		if s.flag != "" {
			fs.String(s.flag, s.def, s.usage+" (env "+s.env+")")
		}
	}
}

// loadConfig reads the named settings: from fs when the flag was given,
// else from the environment (lookupEnv, os.LookupEnv outside tests) when
// the variable is set and not empty, else the default. A malformed value is
// an error naming the flag or variable, the value and what is wanted.
func loadConfig(fs *pflag.FlagSet, lookupEnv func(string) (string, bool), envs ...string) (config, error) {
	var c config
	for _, env := range envs {
		s := lookupSetting(env)
		v, source := s.def, ""
		if f := fs.Lookup(s.flag); s.flag != "" && f != nil && f.Changed {
			v, source = f.Value.String(), "--"+s.flag
		} else if e, ok := lookupEnv(s.env); ok && e != "" {
			v, source = e, s.env
		}
		if err := s.set(&c, v); err != nil {
			if source == "" {
				panic(fmt.Sprintf("ipledger: default of %s %q: %v", s.env, v, err))
			}
			if source == s.env {
				return c, fmt.Errorf("%s=%q: %v", s.env, v, err)
			}
			return c, fmt.Errorf("%s %q: %v", source, v, err)
		}
	}
	return c, nil
}

// unknownVariables returns the IPLEDGER_* variables of environ ("K=V"
// entries, as os.Environ gives them) that ipledger does not read, sorted:
// most likely a typo, which would otherwise leave a setting at its default
// without a word.
func unknownVariables(environ []string) []string {
	var out []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, "IPLEDGER_") || isKnownVariable(k) {
			continue
		}
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func isKnownVariable(k string) bool {
	for _, s := range settings {
		if s.env == k {
			return true
		}
	}
	for _, p := range testVariables {
		if k == p || (strings.HasSuffix(p, "_") && strings.HasPrefix(k, p)) {
			return true
		}
	}
	return false
}

func duration(v, example string) (time.Duration, error) {
	if v == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("want a duration such as %s, or 0", example)
	}
	return d, nil
}

func hostPort(v string) error {
	if _, _, err := net.SplitHostPort(v); err != nil {
		return fmt.Errorf("want host:port such as 127.0.0.1:8080")
	}
	return nil
}
