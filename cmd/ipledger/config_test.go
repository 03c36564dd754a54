package main

import (
	"log/slog"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ipledger/ipledger/auth"
)

// envOf is a lookupEnv over "K=V" entries instead of the process's
// environment, so tests need not change it.
func envOf(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for _, e := range kv {
		k, v, _ := strings.Cut(e, "=")
		m[k] = v
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// A flag wins over its variable, which wins over the default; an empty
// variable counts as unset.
func TestConfigPrecedence(t *testing.T) {
	cmd := newServeCmd()
	if err := cmd.Flags().Parse([]string{"--listen", "127.0.0.1:9999"}); err != nil {
		t.Fatal(err)
	}
	c, err := loadConfig(cmd.Flags(), envOf(
		"IPLEDGER_LISTEN=127.0.0.1:7777", "IPLEDGER_QUARANTINE_HOLD=720h", "IPLEDGER_LOG_LEVEL=debug",
		"IPLEDGER_SECURE_COOKIES=true", "IPLEDGER_DB_MAX_CONNS=8", "IPLEDGER_DEBUG_LISTEN=",
	), serveSettings...)
	if err != nil {
		t.Fatal(err)
	}
	want := config{Listen: "127.0.0.1:9999", DatabaseURL: "sqlite:ipledger.db", QuarantineHold: 720 * time.Hour,
		DBMaxConns: 8, LogLevel: slog.LevelDebug, SecureCookies: true, ReconcileInterval: 5 * time.Minute,
		OIDCScopes: []string{"openid", "profile", "email"}, OIDCGroupsClaim: "groups", OIDCUsernameClaim: "preferred_username",
		OIDCName: "SSO", TokenLogin: true, SessionTTL: 12 * time.Hour, TLSClientRoles: auth.ClientRoles{}}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("config = %+v\nwant     %+v", c, want)
	}
}

// A malformed value is refused with the variable (or flag), the value and
// what is wanted.
func TestConfigBadValues(t *testing.T) {
	for _, tc := range []struct {
		env, flag, want string
	}{
		{env: "IPLEDGER_RECONCILE_INTERVAL=soon", want: `IPLEDGER_RECONCILE_INTERVAL="soon": want a duration such as 5m, or 0`},
		{env: "IPLEDGER_QUARANTINE_HOLD=-1h", want: `IPLEDGER_QUARANTINE_HOLD="-1h": want a duration`},
		{flag: "--quarantine-hold=forever", want: `--quarantine-hold "forever": want a duration such as 720h`},
		{env: "IPLEDGER_DB_MAX_CONNS=many", want: `IPLEDGER_DB_MAX_CONNS="many": want a number of connections`},
		{env: "IPLEDGER_SECURE_COOKIES=yes please", want: `IPLEDGER_SECURE_COOKIES="yes please": want true or false`},
		{env: "IPLEDGER_LOG_LEVEL=verbose", want: `IPLEDGER_LOG_LEVEL="verbose": want debug, info, warn or error`},
		{env: "IPLEDGER_LISTEN=8080", want: `IPLEDGER_LISTEN="8080": want host:port`},
		{env: "IPLEDGER_DEBUG_LISTEN=localhost", want: `IPLEDGER_DEBUG_LISTEN="localhost": want host:port`},
		{env: "IPLEDGER_DATABASE_URL=mysql://db", want: `IPLEDGER_DATABASE_URL="mysql://db"`},
		{env: "IPLEDGER_OIDC_ISSUER=idp.example", want: `IPLEDGER_OIDC_ISSUER="idp.example": want an http(s) URL`},
		{env: "IPLEDGER_OIDC_SCOPES=profile email", want: `IPLEDGER_OIDC_SCOPES="profile email": want a list of scopes holding openid`},
		{env: "IPLEDGER_SESSION_TTL=forever", want: `IPLEDGER_SESSION_TTL="forever": want a duration of a minute or more`},
		{env: "IPLEDGER_TOKEN_LOGIN=maybe", want: `IPLEDGER_TOKEN_LOGIN="maybe": want true or false`},
		{env: "IPLEDGER_AUTH_PROXY_HEADER=X Forwarded User", want: `IPLEDGER_AUTH_PROXY_HEADER="X Forwarded User": want a header name`},
		{env: "IPLEDGER_AUTH_PROXY_TRUSTED=10.0.0.0/33", want: `IPLEDGER_AUTH_PROXY_TRUSTED="10.0.0.0/33": "10.0.0.0/33" is not a CIDR`},
		{env: "IPLEDGER_AUTH_PROXY_TRUSTED=0.0.0.0/1,128.0.0.0/1", want: `together hold every IPv4 address`},
		{env: "IPLEDGER_AUTH_PROXY_LOGOUT_URL=oauth2/sign_out", want: `IPLEDGER_AUTH_PROXY_LOGOUT_URL="oauth2/sign_out": want a path such as /oauth2/sign_out`},
		{env: "IPLEDGER_AUTH_PROXY_LOGOUT_URL=//evil.example/sign_out", want: `want a path such as /oauth2/sign_out`},
		{env: "IPLEDGER_AUTH_PROXY_LOGOUT_URL=javascript:alert(1)", want: `want a path such as /oauth2/sign_out`},
		{env: "IPLEDGER_AUTH_PROXY_LOGOUT_URL=/\\evil.example", want: `want a path such as /oauth2/sign_out`},
		{env: "IPLEDGER_TLS_CLIENT_ROLES=spiffe://s/x=root", want: `IPLEDGER_TLS_CLIENT_ROLES="spiffe://s/x=root": "spiffe://s/x=root": unknown role "root"`},
	} {
		cmd := newServeCmd()
		var args []string
		if tc.flag != "" {
			args = append(args, tc.flag)
		}
		if err := cmd.Flags().Parse(args); err != nil {
			t.Fatal(err)
		}
		_, err := loadConfig(cmd.Flags(), envOf(tc.env), serveSettings...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s%s: got %v, want an error containing %q", tc.env, tc.flag, err, tc.want)
		}
	}
}

// Unknown IPLEDGER_* variables (typos, most likely) are reported; the
// settings and the variables of the tests are not.
func TestUnknownVariables(t *testing.T) {
	got := unknownVariables([]string{"IPLEDGER_LISTEN=:1", "IPLEDGER_LISTN=:1", "PATH=/bin", "IPLEDGER_TEST_POSTGRES=x",
		"IPLEDGER_BENCH_ALLOCATIONS=5", "IPLEDGER_SECURE_COOKIE=true", "IPLEDGER_TOKEN=t", "IPLEDGER_WEBHOOK_SECRET=s"})
	if strings.Join(got, ",") != "IPLEDGER_LISTN,IPLEDGER_SECURE_COOKIE" {
		t.Fatalf("unknown = %v", got)
	}
}

// Every setting is a row of the README's settings table, with its flag,
// and the table has no row the code does not read.
func TestREADMEDocumentsEverySetting(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if m := regexp.MustCompile("^\\|.*\\| `(IPLEDGER_[A-Z_]+)` \\|").FindStringSubmatch(line); m != nil {
			rows[m[1]] = line
		}
	}
	for _, s := range settings {
		row, ok := rows[s.env]
		if !ok {
			t.Errorf("README's settings table has no row for %s", s.env)
			continue
		}
		if s.flag != "" && !strings.Contains(row, "`--"+s.flag+"`") {
			t.Errorf("README's row for %s does not name its flag --%s: %s", s.env, s.flag, row)
		}
		delete(rows, s.env)
	}
	for env := range rows {
		t.Errorf("README documents %s, which ipledger does not read", env)
	}
}

// Identity settings that cannot work together stop the server before it
// starts; above all a proxy header without trusted addresses.
func TestConfigIdentityCombinations(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"IPLEDGER_AUTH_PROXY_HEADER=X-Forwarded-User"}, "IPLEDGER_AUTH_PROXY_TRUSTED is empty"},
		{[]string{"IPLEDGER_AUTH_PROXY_TRUSTED=10.0.0.1"}, "IPLEDGER_AUTH_PROXY_HEADER is not"},
		{[]string{"IPLEDGER_AUTH_PROXY_LOGOUT_URL=/oauth2/sign_out"}, "IPLEDGER_AUTH_PROXY_HEADER is not"},
		{[]string{"IPLEDGER_OIDC_ISSUER=https://idp.example", "IPLEDGER_EXTERNAL_URL=https://ipl.example"}, "IPLEDGER_OIDC_CLIENT_ID is not"},
		{[]string{"IPLEDGER_OIDC_ISSUER=https://idp.example", "IPLEDGER_OIDC_CLIENT_ID=ipl"}, "IPLEDGER_EXTERNAL_URL is not"},
		{[]string{"IPLEDGER_OIDC_CLIENT_SECRET=s"}, "IPLEDGER_OIDC_ISSUER is not"},
		{[]string{"IPLEDGER_TLS_CERT=c.pem"}, "--tls-cert and --tls-key go together"},
		{[]string{"IPLEDGER_TLS_CLIENT_CA=ca.pem"}, "--tls-client-ca needs --tls-cert"},
		{[]string{"IPLEDGER_TLS_CLIENT_ROLES=a=viewer"}, "--tls-client-ca is not"},
		{[]string{"IPLEDGER_TOKEN_LOGIN=false"}, "without a way to sign in"},
		{[]string{"IPLEDGER_AUTH_PROXY_HEADER=X-Forwarded-User", "IPLEDGER_AUTH_PROXY_TRUSTED=127.0.0.1/32"}, ""},
		{[]string{"IPLEDGER_AUTH_PROXY_HEADER=X-Forwarded-User", "IPLEDGER_AUTH_PROXY_TRUSTED=10.0.0.10", "IPLEDGER_AUTH_PROXY_LOGOUT_URL=/oauth2/sign_out"}, ""},
		{[]string{"IPLEDGER_AUTH_PROXY_HEADER=X-Forwarded-User", "IPLEDGER_AUTH_PROXY_TRUSTED=10.0.0.10", "IPLEDGER_AUTH_PROXY_LOGOUT_URL=https://sso.site.example/oauth2/sign_out?rd=https%3A%2F%2Fidp.example%2Flogout"}, ""},
		{[]string{"IPLEDGER_OIDC_ISSUER=https://idp.example", "IPLEDGER_OIDC_CLIENT_ID=ipl", "IPLEDGER_EXTERNAL_URL=https://ipl.example", "IPLEDGER_TOKEN_LOGIN=false"}, ""},
	} {
		c, err := loadConfig(newServeCmd().Flags(), envOf(tc.env...), serveSettings...)
		if err != nil {
			t.Fatalf("%v: %v", tc.env, err)
		}
		err = c.checkIdentity()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%v: refused: %v", tc.env, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want %q", tc.env, err, tc.want)
		}
	}
}

// TestSecureCookiesFollowHTTPS: console cookies are Secure when ipledger
// serves TLS itself or when the URL people use (IPLEDGER_EXTERNAL_URL) is
// https, where TLS ends in front of it; a session cookie sent in clear
// over plain HTTP is otherwise one forgotten setting away.
func TestSecureCookiesFollowHTTPS(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want bool
	}{
		{nil, false},
		{[]string{"IPLEDGER_SECURE_COOKIES=true"}, true},
		{[]string{"IPLEDGER_EXTERNAL_URL=http://ipl.lab.example"}, false},
		{[]string{"IPLEDGER_EXTERNAL_URL=https://ipl.site.example"}, true},
		{[]string{"IPLEDGER_EXTERNAL_URL=HTTPS://ipl.site.example"}, true},
		{[]string{"IPLEDGER_TLS_CERT=c.pem", "IPLEDGER_TLS_KEY=k.pem"}, true},
	} {
		c, err := loadConfig(newServeCmd().Flags(), envOf(tc.env...), serveSettings...)
		if err != nil {
			t.Fatalf("%v: %v", tc.env, err)
		}
		if got := c.secureCookies(); got != tc.want {
			t.Errorf("%v: secure cookies %v, want %v", tc.env, got, tc.want)
		}
	}
}
