package web_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/emptypb"
	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/proto/gen/forge/forgeconnect"
	"github.com/ipledger/ipledger/web"
)

// idToken signs user in at the provider and redeems the code for an ID
// token, as a script using the provider's own client would.
func (s *ssoSite) idToken(t *testing.T, user, pw string) string {
	t.Helper()
	idt, _ := s.signInTokens(t, user, pw)
	return idt
}

// accessToken is the access token (a JWT) of such a sign-in.
func (s *ssoSite) accessToken(t *testing.T, user, pw string) string {
	t.Helper()
	_, at := s.signInTokens(t, user, pw)
	return at
}

// signInTokens signs user in at the provider with ipledger's sign-in
// parameters (PKCE, state, nonce) and redeems the code for the ID token
// and the access token.
func (s *ssoSite) signInTokens(t *testing.T, user, pw string) (idToken, accessToken string) {
	t.Helper()
	authURL, st, err := s.oidc.Begin(context.Background(), "/")
	if err != nil {
		t.Fatal(err)
	}
	cb, err := s.idp.Authorize(newJarBrowser(s.consoleSite).c, authURL, user, pw)
	if err != nil {
		t.Fatal(err)
	}
	idToken, accessToken, err = s.idp.Tokens(s.srv.URL+auth.CallbackPath, cb.Query().Get("code"), st.Verifier)
	if err != nil {
		t.Fatal(err)
	}
	if !auth.LooksLikeJWT(accessToken) {
		t.Fatalf("the provider's access token is not a JWT: %.8q…", accessToken)
	}
	return idToken, accessToken
}

// jwtClaims reads a JWT's claims without verifying it.
func jwtClaims(t *testing.T, raw string) map[string]any {
	t.Helper()
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %.12q…", raw)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	claims := map[string]any{}
	if err := json.Unmarshal(b, &claims); err != nil {
		t.Fatal(err)
	}
	return claims
}

func apiCall(t *testing.T, base, method, path, bearer, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(b)
}

// TestJWTBearerOnREST: an access token of the issuer (a JWT, audience
// the client id) is a bearer token on the API, acting as user:NAME with
// the role of its groups; a refused JWT is 401 with WWW-Authenticate
// invalid_token, and ipledger's own tokens keep working beside JWTs.
func TestJWTBearerOnREST(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		t.Parallel()
		s := newSSOSite(t, db, true)
		jwt := s.accessToken(t, "alice", "alice-pw")
		res, body := apiCall(t, s.srv.URL, "POST", "/api/v1/pools", jwt, `{"name":"jwt-vlans","type":"integer","ranges":[{"first":"10","last":"20"}]}`)
		if res.StatusCode != http.StatusCreated {
			t.Fatalf("create pool with a JWT: %d %s", res.StatusCode, body)
		}
		if ev := events(t, db, "pool.create"); len(ev) != 1 || ev[0].Actor != "user:alice" {
			t.Fatalf("pool.create: %+v", ev)
		}
		viewer := s.accessToken(t, "bob", "bob-pw")
		if res, _ := apiCall(t, s.srv.URL, "GET", "/api/v1/pools", viewer, ""); res.StatusCode != http.StatusOK {
			t.Fatalf("viewer JWT read: %d", res.StatusCode)
		}
		if res, _ := apiCall(t, s.srv.URL, "POST", "/api/v1/pools", viewer, `{"name":"x","type":"integer"}`); res.StatusCode != http.StatusForbidden {
			t.Fatalf("viewer JWT write: %d", res.StatusCode)
		}
		parts := strings.Split(jwt, ".")
		for name, bad := range map[string]string{
			"tampered payload": parts[0] + "." + strings.TrimRight(parts[1], "A") + "B." + parts[2],
			"no signature":     parts[0] + "." + parts[1] + ".",
			"alg none":         "eyJhbGciOiJub25lIn0." + parts[1] + ".",
		} {
			res, body := apiCall(t, s.srv.URL, "GET", "/api/v1/pools", bad, "")
			if res.StatusCode != http.StatusUnauthorized || res.Header.Get("WWW-Authenticate") != `Bearer error="invalid_token"` || !strings.Contains(body, `"unauthorized"`) {
				t.Errorf("%s: %d %q %s", name, res.StatusCode, res.Header.Get("WWW-Authenticate"), body)
			}
		}
		if res, _ := apiCall(t, s.srv.URL, "GET", "/api/v1/pools", s.tokens[auth.RoleAdmin], ""); res.StatusCode != http.StatusOK {
			t.Fatalf("an ipledger token beside JWTs: %d", res.StatusCode)
		}

		// The same JWT on the gRPC service (gRPC-Web over HTTP/1.1 here).
		for tok, want := range map[string]connect.Code{jwt: 0, parts[0] + "." + parts[1] + ".": connect.CodeUnauthenticated} {
			fc := forgeconnect.NewForgeClient(http.DefaultClient, s.srv.URL, connect.WithGRPCWeb(), connect.WithInterceptors(jwtBearer(tok)))
			_, err := fc.GetAllExpectedMachines(context.Background(), connect.NewRequest(&emptypb.Empty{}))
			if connect.CodeOf(err) != want && !(want == 0 && err == nil) {
				t.Fatalf("gRPC with a JWT: %v, want %v", err, want)
			}
		}
	})
}

func jwtBearer(tok string) connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+tok)
			return next(ctx, req)
		}
	}
}

// proxySite is a server behind a trusted proxy at 192.0.2.10, driven
// through its handler so each request can come from any address.
type proxySite struct {
	h   http.Handler
	log *bytes.Buffer
	db  *gorm.DB
}

func newProxySite(t *testing.T, db *gorm.DB) *proxySite {
	trusted, _ := auth.ParseCIDRs("192.0.2.10/32, 2001:db8::10")
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	a := allocator.New(db, allocator.Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	s := web.New(web.Config{Allocator: a, Logger: log, Identity: web.Identity{Proxy: &auth.Proxy{
		UserHeader: "X-Forwarded-User", GroupsHeader: "X-Forwarded-Groups", Trusted: trusted,
		Roles: auth.NewRoleMap([]string{"ipam-admins"}, []string{"ipam-operators"}, []string{"noc"})}}})
	return &proxySite{h: s.Handler(), log: &logs, db: db}
}

func (p *proxySite) do(remote, method, path, body string, hdr ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.RemoteAddr = remote
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	p.h.ServeHTTP(rec, req)
	return rec
}

// TestTrustedProxy: the proxy's headers from its own address make the
// person, console and API alike; the same headers from anywhere else are
// refused 401 and logged, whatever X-Forwarded-For says.
func TestTrustedProxy(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		t.Parallel()
		p := newProxySite(t, db)
		carol := []string{"X-Forwarded-User", "carol", "X-Forwarded-Groups", "staff,ipam-operators"}
		if rec := p.do("192.0.2.10:5555", "GET", "/", "", carol...); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "user:carol") {
			t.Fatalf("console from the proxy: %d", rec.Code)
		}
		rec := p.do("[2001:db8::10]:5555", "POST", "/api/v1/pools", `{"name":"proxy-vlans","type":"integer","ranges":[{"first":"1","last":"9"}]}`,
			"X-Forwarded-User", "dave", "X-Forwarded-Groups", "ipam-admins")
		if rec.Code != http.StatusCreated {
			t.Fatalf("API from the proxy: %d %s", rec.Code, rec.Body)
		}
		if ev := events(t, db, "pool.create"); len(ev) != 1 || ev[0].Actor != "user:dave" {
			t.Fatalf("pool.create: %+v", ev)
		}
		for _, remote := range []string{"203.0.113.9:1", "192.0.2.11:1", "127.0.0.1:1"} {
			for _, path := range []string{"/", "/api/v1/pools", "/login", "/healthz"} {
				rec := p.do(remote, "GET", path, "", append(carol, "X-Forwarded-For", "192.0.2.10")...)
				if rec.Code != http.StatusUnauthorized {
					t.Errorf("%s %s with the user header: %d, want 401", remote, path, rec.Code)
				}
			}
		}
		if !strings.Contains(p.log.String(), `"msg":"`+proxyRefusedLog+`"`) || !strings.Contains(p.log.String(), "203.0.113.9") {
			t.Fatalf("the refusal is not logged:\n%s", p.log.String())
		}
		// No role: the page says so and names the header read.
		rec = p.do("192.0.2.10:1", "GET", "/", "", "X-Forwarded-User", "eve", "X-Forwarded-Groups", "staff")
		if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "No ipledger role") || !strings.Contains(rec.Body.String(), "X-Forwarded-Groups") {
			t.Fatalf("no role: %d %s", rec.Code, rec.Body)
		}
		// A cross-site form post carried by the proxy's own cookie is
		// refused, and a console form needs the page's CSRF token.
		rec = p.do("192.0.2.10:1", "POST", "/api/v1/pools", `{"name":"csrf","type":"integer"}`, append(carol, "Sec-Fetch-Site", "cross-site")...)
		if rec.Code != http.StatusForbidden {
			t.Fatalf("cross-site API post through the proxy: %d", rec.Code)
		}
		rec = p.do("192.0.2.10:1", "POST", "/pools", "name=x&type=integer&first=1&last=2", append(carol, "Content-Type", "application/x-www-form-urlencoded")...)
		if rec.Code != http.StatusForbidden {
			t.Fatalf("console post without CSRF through the proxy: %d", rec.Code)
		}
	})
}

// proxyRefusedLog is the message of a refused proxy user header's log
// line, as docs/identity.md names it for operators to search for.
const proxyRefusedLog = "proxy user header refused"

// TestProxyRefusalLogDocumented: the log message docs/identity.md tells
// operators to look for is the one the server writes.
func TestProxyRefusalLogDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/identity.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "`"+proxyRefusedLog+"`") {
		t.Fatalf("docs/identity.md does not name the log message %q", proxyRefusedLog)
	}
}

var _ = models.SQLite
