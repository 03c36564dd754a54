package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database"
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

	// Identity (docs/identity.md).
	AdminGroups, OperatorGroups, ViewerGroups  []string
	OIDCIssuer, OIDCClientID, OIDCClientSecret string
	ExternalURL                                string
	OIDCScopes                                 []string
	OIDCGroupsClaim, OIDCUsernameClaim         string
	OIDCName, OIDCAPIAudience                  string
	TokenLogin                                 bool
	SessionTTL                                 time.Duration
	ProxyHeader, ProxyGroupsHeader             string
	ProxyLogoutURL                             string
	ProxyTrusted                               []netip.Prefix
	TLSCert, TLSKey, TLSClientCA               string
	TLSClientRoles                             auth.ClientRoles
	CACert, ClientCert, ClientKey              string
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
	{env: "IPLEDGER_DATABASE_URL", flag: "database", def: database.DefaultURL, usage: "database URL: sqlite:PATH or postgres://…",
		set: func(c *config, v string) error { c.DatabaseURL = v; _, err := database.ParseURL(v); return err }},
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
	{env: "IPLEDGER_SECURE_COOKIES", def: "false", usage: "mark console cookies Secure (automatic with TLS or an https IPLEDGER_EXTERNAL_URL)",
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
	{env: "IPLEDGER_CA_CERT", flag: "ca-cert", usage: "PEM file of the CA that signs the server's TLS certificate (client commands)",
		set: func(c *config, v string) error { c.CACert = v; return nil }},
	{env: "IPLEDGER_CLIENT_CERT", flag: "client-cert", usage: "PEM client certificate for mutual TLS (client commands)",
		set: func(c *config, v string) error { c.ClientCert = v; return nil }},
	{env: "IPLEDGER_CLIENT_KEY", flag: "client-key", usage: "PEM key of --client-cert (client commands)",
		set: func(c *config, v string) error { c.ClientKey = v; return nil }},

	// Identity: single sign-on, JWTs, the trusted proxy, TLS and client
	// certificates (docs/identity.md).
	{env: "IPLEDGER_ROLE_ADMIN_GROUPS", usage: "groups whose members are admins (comma-separated)",
		set: func(c *config, v string) error { c.AdminGroups = auth.SplitList(v); return nil }},
	{env: "IPLEDGER_ROLE_OPERATOR_GROUPS", usage: "groups whose members are operators (comma-separated)",
		set: func(c *config, v string) error { c.OperatorGroups = auth.SplitList(v); return nil }},
	{env: "IPLEDGER_ROLE_VIEWER_GROUPS", usage: "groups whose members are viewers (comma-separated)",
		set: func(c *config, v string) error { c.ViewerGroups = auth.SplitList(v); return nil }},
	{env: "IPLEDGER_OIDC_ISSUER", usage: "OIDC issuer URL for single sign-on and bearer JWTs (off when empty)",
		set: func(c *config, v string) error {
			c.OIDCIssuer = v
			if v == "" {
				return nil
			}
			return httpURL(v)
		}},
	{env: "IPLEDGER_OIDC_CLIENT_ID", usage: "OIDC client id",
		set: func(c *config, v string) error { c.OIDCClientID = v; return nil }},
	{env: "IPLEDGER_OIDC_CLIENT_SECRET", usage: "OIDC client secret (empty: a public client with PKCE)",
		set: func(c *config, v string) error { c.OIDCClientSecret = v; return nil }},
	{env: "IPLEDGER_EXTERNAL_URL", usage: "the URL people use to reach ipledger; the OIDC redirect URI is EXTERNAL_URL/auth/oidc/callback",
		set: func(c *config, v string) error {
			c.ExternalURL = strings.TrimRight(v, "/")
			if v == "" {
				return nil
			}
			return httpURL(v)
		}},
	{env: "IPLEDGER_OIDC_SCOPES", def: "openid profile email", usage: "OIDC scopes asked for (space- or comma-separated)",
		set: func(c *config, v string) error {
			c.OIDCScopes = strings.Fields(strings.ReplaceAll(v, ",", " "))
			for _, sc := range c.OIDCScopes {
				if sc == "openid" {
					return nil
				}
			}
			return fmt.Errorf("want a list of scopes holding openid")
		}},
	{env: "IPLEDGER_OIDC_GROUPS_CLAIM", def: "groups", usage: "claim holding a person's groups (a string or an array)",
		set: func(c *config, v string) error { c.OIDCGroupsClaim = v; return nil }},
	{env: "IPLEDGER_OIDC_USERNAME_CLAIM", def: "preferred_username", usage: "claim holding a person's user name (else email, else sub)",
		set: func(c *config, v string) error { c.OIDCUsernameClaim = v; return nil }},
	{env: "IPLEDGER_OIDC_NAME", def: "SSO", usage: "label of the login page's single sign-on button",
		set: func(c *config, v string) error { c.OIDCName = v; return nil }},
	{env: "IPLEDGER_OIDC_API_AUDIENCE", usage: "audience a bearer JWT must carry (default the client id)",
		set: func(c *config, v string) error { c.OIDCAPIAudience = v; return nil }},
	{env: "IPLEDGER_TOKEN_LOGIN", def: "true", usage: "offer the API token form on the login page",
		set: func(c *config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("want true or false")
			}
			c.TokenLogin = b
			return nil
		}},
	{env: "IPLEDGER_SESSION_TTL", def: "12h", usage: "lifetime of a console session",
		set: func(c *config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < time.Minute {
				return fmt.Errorf("want a duration of a minute or more, such as 12h")
			}
			c.SessionTTL = d
			return nil
		}},
	{env: "IPLEDGER_AUTH_PROXY_HEADER", usage: "header naming the person, honoured only from IPLEDGER_AUTH_PROXY_TRUSTED (off when empty)",
		set: func(c *config, v string) error { c.ProxyHeader = v; return headerName(v) }},
	{env: "IPLEDGER_AUTH_PROXY_GROUPS_HEADER", usage: "header holding the person's groups, comma-separated",
		set: func(c *config, v string) error { c.ProxyGroupsHeader = v; return headerName(v) }},
	{env: "IPLEDGER_AUTH_PROXY_TRUSTED", usage: "addresses of the trusted proxies: CIDRs or addresses, comma-separated",
		set: func(c *config, v string) (err error) {
			c.ProxyTrusted, err = auth.ParseCIDRs(v)
			return err
		}},
	{env: "IPLEDGER_AUTH_PROXY_LOGOUT_URL", usage: "where the console's Sign out sends a person the trusted proxy signed in: the proxy's sign-out, such as /oauth2/sign_out",
		set: func(c *config, v string) error { c.ProxyLogoutURL = v; return logoutURL(v) }},
	{env: "IPLEDGER_TLS_CERT", flag: "tls-cert", usage: "PEM certificate file: serve HTTPS (and gRPC over HTTP/2); re-read when it changes",
		set: func(c *config, v string) error { c.TLSCert = v; return nil }},
	{env: "IPLEDGER_TLS_KEY", flag: "tls-key", usage: "PEM key file of --tls-cert",
		set: func(c *config, v string) error { c.TLSKey = v; return nil }},
	{env: "IPLEDGER_TLS_CLIENT_CA", flag: "tls-client-ca", usage: "PEM CA file: a client certificate it signs authenticates its holder",
		set: func(c *config, v string) error { c.TLSClientCA = v; return nil }},
	{env: "IPLEDGER_TLS_CLIENT_ROLES", usage: "client certificate URI SAN (SPIFFE id) or CN to role: ID=role,ID=role",
		set: func(c *config, v string) (err error) {
			c.TLSClientRoles, err = auth.ParseClientRoles(v)
			return err
		}},
}

// identitySettings are serve's identity settings, checked together by
// checkIdentity.
var identitySettings = []string{"IPLEDGER_ROLE_ADMIN_GROUPS", "IPLEDGER_ROLE_OPERATOR_GROUPS", "IPLEDGER_ROLE_VIEWER_GROUPS",
	"IPLEDGER_OIDC_ISSUER", "IPLEDGER_OIDC_CLIENT_ID", "IPLEDGER_OIDC_CLIENT_SECRET", "IPLEDGER_EXTERNAL_URL",
	"IPLEDGER_OIDC_SCOPES", "IPLEDGER_OIDC_GROUPS_CLAIM", "IPLEDGER_OIDC_USERNAME_CLAIM", "IPLEDGER_OIDC_NAME",
	"IPLEDGER_OIDC_API_AUDIENCE", "IPLEDGER_TOKEN_LOGIN", "IPLEDGER_SESSION_TTL",
	"IPLEDGER_AUTH_PROXY_HEADER", "IPLEDGER_AUTH_PROXY_GROUPS_HEADER", "IPLEDGER_AUTH_PROXY_TRUSTED", "IPLEDGER_AUTH_PROXY_LOGOUT_URL",
	"IPLEDGER_TLS_CERT", "IPLEDGER_TLS_KEY", "IPLEDGER_TLS_CLIENT_CA", "IPLEDGER_TLS_CLIENT_ROLES"}

// secureCookies reports whether console cookies are Secure: when set, when
// ipledger serves TLS itself, or when the URL people use is https (TLS
// ends in front of ipledger).
func (c config) secureCookies() bool {
	return c.SecureCookies || c.TLSCert != "" || strings.HasPrefix(strings.ToLower(c.ExternalURL), "https://")
}

// checkIdentity refuses identity settings that cannot work together: the
// server does not start rather than run with a door open or shut by
// mistake.
func (c config) checkIdentity() error {
	switch {
	case c.OIDCIssuer != "" && c.OIDCClientID == "":
		return fmt.Errorf("IPLEDGER_OIDC_ISSUER is set but IPLEDGER_OIDC_CLIENT_ID is not")
	case c.OIDCIssuer != "" && c.ExternalURL == "":
		return fmt.Errorf("IPLEDGER_OIDC_ISSUER is set but IPLEDGER_EXTERNAL_URL is not: the redirect URI is EXTERNAL_URL/auth/oidc/callback")
	case c.OIDCIssuer == "" && (c.OIDCClientID != "" || c.OIDCClientSecret != ""):
		return fmt.Errorf("IPLEDGER_OIDC_CLIENT_ID or _SECRET is set but IPLEDGER_OIDC_ISSUER is not")
	case c.ProxyHeader != "" && len(c.ProxyTrusted) == 0:
		return fmt.Errorf("IPLEDGER_AUTH_PROXY_HEADER is set but IPLEDGER_AUTH_PROXY_TRUSTED is empty: the header would be believed from nobody, or everybody; list the proxies' addresses")
	case c.ProxyHeader == "" && (c.ProxyGroupsHeader != "" || len(c.ProxyTrusted) > 0 || c.ProxyLogoutURL != ""):
		return fmt.Errorf("IPLEDGER_AUTH_PROXY_GROUPS_HEADER, _TRUSTED or _LOGOUT_URL is set but IPLEDGER_AUTH_PROXY_HEADER is not")
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return fmt.Errorf("--tls-cert and --tls-key go together")
	case c.TLSClientCA != "" && c.TLSCert == "":
		return fmt.Errorf("--tls-client-ca needs --tls-cert and --tls-key")
	case len(c.TLSClientRoles) > 0 && c.TLSClientCA == "":
		return fmt.Errorf("IPLEDGER_TLS_CLIENT_ROLES is set but --tls-client-ca is not")
	case !c.TokenLogin && c.OIDCIssuer == "":
		return fmt.Errorf("IPLEDGER_TOKEN_LOGIN=false leaves the console without a way to sign in: set IPLEDGER_OIDC_ISSUER too")
	}
	return nil
}

func httpURL(v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("want an http(s) URL such as https://idp.example/realms/site")
	}
	return nil
}

// logoutURL holds IPLEDGER_AUTH_PROXY_LOGOUT_URL to a path of the site
// the browser is on (the proxy's, /oauth2/sign_out) or an http(s) URL:
// nothing a browser would read as another scheme or a relative path.
func logoutURL(v string) error {
	u, err := url.Parse(v)
	switch {
	case v == "":
		return nil
	case err != nil || strings.ContainsAny(v, " \t\r\n\\"):
	case strings.HasPrefix(v, "/") && !strings.HasPrefix(v, "//") && u.Scheme == "" && u.Host == "":
		return nil
	case (u.Scheme == "http" || u.Scheme == "https") && u.Host != "":
		return nil
	}
	return fmt.Errorf("want a path such as /oauth2/sign_out or an http(s) URL such as https://ipledger.site.example/oauth2/sign_out")
}

func headerName(v string) error {
	for _, r := range v {
		if !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return fmt.Errorf("want a header name such as X-Forwarded-User")
		}
	}
	return nil
}

// The settings each kind of command reads.
var (
	serveSettings = append([]string{"IPLEDGER_LISTEN", "IPLEDGER_DATABASE_URL", "IPLEDGER_POOLS", "IPLEDGER_QUARANTINE_HOLD",
		"IPLEDGER_ADMIN_TOKEN", "IPLEDGER_DB_MAX_CONNS", "IPLEDGER_DEBUG_LISTEN", "IPLEDGER_LOG_LEVEL",
		"IPLEDGER_SECURE_COOKIES", "IPLEDGER_RECONCILE_INTERVAL"}, identitySettings...)
	databaseSettings = []string{"IPLEDGER_DATABASE_URL", "IPLEDGER_DB_MAX_CONNS"}
	clientSettings   = []string{"IPLEDGER_URL", "IPLEDGER_TOKEN", "IPLEDGER_CA_CERT", "IPLEDGER_CLIENT_CERT", "IPLEDGER_CLIENT_KEY"}
)

// testVariables are read by the tests and tools, not by ipledger: they are
// known, so the server does not warn about them.
var testVariables = []string{"IPLEDGER_TEST_POSTGRES", "IPLEDGER_CHROMIUM", "IPLEDGER_SCREENSHOTS", "IPLEDGER_BENCH_"}

// webhookSecretVariable carries the secret of `ipledger webhook create`: a
// secret, not a setting (a flag would show it in ps), read by that command
// alone. The server knows it, so a shell that exported it for the command,
// as docs/feed.md does, does not make `ipledger serve` warn of a typo.
const webhookSecretVariable = "IPLEDGER_WEBHOOK_SECRET"

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
	if k == webhookSecretVariable {
		return true
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
