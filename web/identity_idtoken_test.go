package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/emptypb"
	"gorm.io/gorm"

	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/auth/oidctest"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/proto/gen/forge/forgeconnect"
	"github.com/ipledger/ipledger/web"
)

// TestIDTokenIsNoBearer: the ID token ipledger itself received at a
// console sign-in is no API credential: as a bearer token on REST and gRPC
// it is 401 invalid_token and logged — taken from the session, as the
// id_token_hint sign-out hands the browser (where its history or a
// proxy's log keeps it), after sign-out and after a restart of the server.
// Every other token of the issuer that passes the checks is one, whatever
// its shape: an ID token of the same person that ipledger never received
// (a client of the same issuer got it, for ipledger's audience), the
// access token, a client-credentials token. Nothing a refused token sent
// was written, and no token is in the log.
func TestIDTokenIsNoBearer(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		t.Parallel()
		var logs lockedBuffer
		s := newSSOSiteOpts(t, db, ssoOptions{inIDToken: true, log: &logs})
		createPool := func(tok, name string) (*http.Response, string) {
			return apiCall(t, s.srv.URL, "POST", "/api/v1/pools", tok, `{"name":"`+name+`","type":"integer","ranges":[{"first":"1","last":"9"}]}`)
		}
		grpcCode := func(tok string) connect.Code {
			fc := forgeconnect.NewForgeClient(http.DefaultClient, s.srv.URL, connect.WithGRPCWeb(), connect.WithInterceptors(jwtBearer(tok)))
			if _, err := fc.GetAllExpectedMachines(context.Background(), connect.NewRequest(&emptypb.Empty{})); err != nil {
				return connect.CodeOf(err)
			}
			return 0
		}
		refused := func(t *testing.T, what, tok string) {
			t.Helper()
			res, body := createPool(tok, "by-id-token")
			if res.StatusCode != http.StatusUnauthorized || res.Header.Get("WWW-Authenticate") != web.WWWAuthenticateInvalid ||
				!strings.Contains(body, auth.ReceivedAtSignIn) {
				t.Fatalf("%s on REST: %d %q %s", what, res.StatusCode, res.Header.Get("WWW-Authenticate"), body)
			}
			if res, _ := apiCall(t, s.srv.URL, "GET", "/api/v1/pools", tok, ""); res.StatusCode != http.StatusUnauthorized {
				t.Fatalf("%s reading on REST: %d", what, res.StatusCode)
			}
			if code := grpcCode(tok); code != connect.CodeUnauthenticated {
				t.Fatalf("%s on gRPC: %v", what, code)
			}
		}
		accepted := func(t *testing.T, what, tok, pool, actor string) {
			t.Helper()
			if res, body := createPool(tok, pool); res.StatusCode != http.StatusCreated {
				t.Fatalf("%s on REST: %d %s", what, res.StatusCode, body)
			}
			if code := grpcCode(tok); code != 0 {
				t.Fatalf("%s on gRPC: %v", what, code)
			}
			if ev := events(t, db, "pool.create"); ev[len(ev)-1].Actor != actor || ev[len(ev)-1].ObjectID != pool {
				t.Fatalf("%s: pool.create %+v", what, ev[len(ev)-1])
			}
		}

		// alice signs in through the console: ipledger receives her ID
		// token (at_hash, nonce and all) and keeps it for sign-out.
		alice := newJarBrowser(s.consoleSite)
		if res := s.finish(alice, s.signIn(alice, "", "alice", "alice-pw")); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign-in: %d", res.StatusCode)
		}
		session := s.received.last()
		if c := jwtClaims(t, session); c["nonce"] == nil || c["at_hash"] == nil {
			t.Fatalf("the provider's ID token carries no nonce or at_hash: %v", c)
		}
		refused(t, "the session's ID token", session)

		// Tokens of a sign-in ipledger never saw, with its parameters
		// (nonce and all): the ID token and the access token both work.
		idt, access := s.signInTokens(t, "alice", "alice-pw")
		if c := jwtClaims(t, idt); c["nonce"] == nil || c["at_hash"] == nil || c["sub"] != "u-alice" {
			t.Fatalf("the other sign-in's ID token: %v", c)
		}
		accepted(t, "an ID token ipledger never received", idt, "by-other-id-token", "user:alice")
		accepted(t, "an access token", access, "by-access-token", "user:alice")
		svc, err := s.idp.ServiceToken()
		if err != nil {
			t.Fatal(err)
		}
		accepted(t, "a client-credentials token", svc, "by-service", "service:"+oidctest.ServiceClientID)

		// Sign-out hands the session's ID token to the browser as
		// id_token_hint: refused, and so it stays after a restart.
		res := alice.post("/logout", nil, true)
		loc, _ := url.Parse(res.Header.Get("Location"))
		hint := loc.Query().Get("id_token_hint")
		if res.StatusCode != http.StatusSeeOther || hint != session {
			t.Fatalf("logout: %d → %s (the hint is the session's token: %v)", res.StatusCode, loc, hint == session)
		}
		refused(t, "the id_token_hint of sign-out", hint)
		s.restart()
		refused(t, "the id_token_hint after a restart", hint)
		accepted(t, "an access token after a restart", access, "after-restart", "user:alice")

		var names []string
		db.Raw(`SELECT name FROM pools ORDER BY name`).Scan(&names)
		if strings.Join(names, ",") != "after-restart,by-access-token,by-other-id-token,by-service" {
			t.Fatalf("pools %v: a refused token wrote", names)
		}
		out := logs.String()
		if n := strings.Count(out, `"msg":"bearer JWT refused"`); n != 9 || !strings.Contains(out, auth.ReceivedAtSignIn) {
			t.Fatalf("%d refusals logged, want 9 naming the sign-in's ID token:\n%s", n, out)
		}
		for _, tok := range []string{session, idt, access} {
			if strings.Contains(out, strings.Split(tok, ".")[2]) {
				t.Fatal("the log holds a token")
			}
		}
	})
}
