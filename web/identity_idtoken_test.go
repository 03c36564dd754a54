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

	"github.com/ipledger/ipledger/auth/oidctest"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/proto/gen/forge/forgeconnect"
	"github.com/ipledger/ipledger/web"
)

// TestIDTokenIsNoBearer: with IPLEDGER_OIDC_API_AUDIENCE left at the
// client id, the ID token of a sign-in verifies against the issuer for
// ipledger's audience, yet it is no API credential: as a bearer token on
// REST and gRPC it is 401 invalid_token and logged — the ID token of a
// sign-in made through the console, the one its session keeps and sign-out
// puts in the end-session URL as id_token_hint (where a browser's history
// or a proxy's log would keep it), both before and after sign-out. The
// access token of the same sign-in and a client-credentials token keep
// working, and nothing a refused token sent was written.
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
				!strings.Contains(body, "an ID token is not an API credential") {
				t.Fatalf("%s on REST: %d %q %s", what, res.StatusCode, res.Header.Get("WWW-Authenticate"), body)
			}
			if res, _ := apiCall(t, s.srv.URL, "GET", "/api/v1/pools", tok, ""); res.StatusCode != http.StatusUnauthorized {
				t.Fatalf("%s reading on REST: %d", what, res.StatusCode)
			}
			if code := grpcCode(tok); code != connect.CodeUnauthenticated {
				t.Fatalf("%s on gRPC: %v", what, code)
			}
		}

		// alice signs in through the console; her session keeps the ID
		// token of that sign-in.
		alice := newJarBrowser(s.consoleSite)
		if res := s.finish(alice, s.signIn(alice, "", "alice", "alice-pw")); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign-in: %d", res.StatusCode)
		}
		// The tokens of a sign-in with ipledger's parameters (nonce and
		// all): the ID token is refused, the access token beside it works.
		idt, access := s.signInTokens(t, "alice", "alice-pw")
		if c := jwtClaims(t, idt); c["nonce"] == nil {
			t.Fatalf("the provider's ID token carries no nonce: %v", c)
		}
		refused(t, "the ID token of a sign-in", idt)
		if res, body := createPool(access, "by-access-token"); res.StatusCode != http.StatusCreated {
			t.Fatalf("the access token of the same sign-in: %d %s", res.StatusCode, body)
		}
		if code := grpcCode(access); code != 0 {
			t.Fatalf("the access token on gRPC: %v", code)
		}
		if ev := events(t, db, "pool.create"); len(ev) != 1 || ev[0].Actor != "user:alice" {
			t.Fatalf("pool.create: %+v", ev)
		}
		svc, err := s.idp.ServiceToken()
		if err != nil {
			t.Fatal(err)
		}
		if res, body := createPool(svc, "by-service"); res.StatusCode != http.StatusCreated {
			t.Fatalf("a client-credentials token: %d %s", res.StatusCode, body)
		}
		if code := grpcCode(svc); code != 0 {
			t.Fatalf("a client-credentials token on gRPC: %v", code)
		}
		if ev := events(t, db, "pool.create"); len(ev) != 2 || ev[1].Actor != "service:"+oidctest.ServiceClientID {
			t.Fatalf("pool.create: %+v", ev)
		}

		// Sign-out hands the session's ID token to the browser as
		// id_token_hint: refused as a bearer token, now and after an
		// admin or the person ended the session.
		res := alice.post("/logout", nil, true)
		loc, _ := url.Parse(res.Header.Get("Location"))
		hint := loc.Query().Get("id_token_hint")
		if res.StatusCode != http.StatusSeeOther || hint == "" {
			t.Fatalf("logout: %d → %s", res.StatusCode, loc)
		}
		if c := jwtClaims(t, hint); c["sub"] != "u-alice" {
			t.Fatalf("the hint names %v, not alice", c["sub"])
		}
		refused(t, "the id_token_hint of sign-out", hint)

		var names []string
		db.Raw(`SELECT name FROM pools ORDER BY name`).Scan(&names)
		if strings.Join(names, ",") != "by-access-token,by-service" {
			t.Fatalf("pools %v: a refused token wrote", names)
		}
		out := logs.String()
		if n := strings.Count(out, `"msg":"bearer JWT refused"`); n < 6 || !strings.Contains(out, "an ID token is not an API credential") {
			t.Fatalf("%d refusals logged, want 6 naming the ID token:\n%s", n, out)
		}
		for _, tok := range []string{idt, hint} {
			if strings.Contains(out, strings.Split(tok, ".")[2]) {
				t.Fatal("the log holds a refused token")
			}
		}
	})
}
