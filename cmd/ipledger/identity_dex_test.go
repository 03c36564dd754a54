package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/internal/testkit/browserkit"
	"github.com/ipledger/ipledger/internal/testkit/idpkit"
	"github.com/ipledger/ipledger/proto/gen/forge/forgeconnect"
)

// The tests of this file run ipledger (the binary), Dex and oauth2-proxy
// as a site would, each configured by its example of docs/identity.md
// (docs/examples/identity), only the addresses replaced: Dex's password
// grant and cross-client tokens on REST and gRPC, sign-in through Dex's
// own login page in Chromium, the sign-in's ID token refused as a bearer
// token also after sign-out and a restart, and sign-in and sign-out
// through oauth2-proxy.

// dexServer is ipledger signing people in with Dex, as
// ipledger-oidc.env configures it, on a SQLite file that outlives a
// restart.
type dexServer struct {
	dex  *idpkit.Dex
	url  string
	env  []string
	proc *idpkit.Process
}

func startDexSite(t *testing.T) *dexServer {
	t.Helper()
	bins := idpkit.Build(t)
	port := idpkit.FreePort(t)
	s := &dexServer{url: idpkit.Origin(port)}
	s.dex = idpkit.StartDex(t, bins, s.url, idpkit.Origin(idpkit.FreePort(t)))
	s.env = idpkit.Env(t, idpkit.Example(t, "ipledger-oidc.env", map[string]string{
		idpkit.ExampleDex: strings.TrimSuffix(s.dex.Issuer, "/dex"), "0.0.0.0:8080": "127.0.0.1:" + strconv.Itoa(port),
		idpkit.ExampleIPLedger: s.url,
	}))
	s.env = append(s.env, "IPLEDGER_DATABASE_URL=sqlite:"+t.TempDir()+"/ipledger.db", "IPLEDGER_ADMIN_TOKEN="+mpAdminToken)
	s.start(t)
	return s
}

// start runs `ipledger serve` and waits until it is ready and has
// discovered Dex (the login page offers the button).
func (s *dexServer) start(t *testing.T) {
	t.Helper()
	s.proc = idpkit.Start(t, "ipledger", t.TempDir(), mpBinary(t), s.env, "serve")
	s.proc.WaitHTTP(t, s.url+"/readyz")
	for end := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		code, body := call(t, s.url, "GET", "/login", "", "")
		if code == http.StatusOK && strings.Contains(body, `id="sso"`) && !strings.Contains(body, "unavailable") {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("ipledger never offered sign-in with Dex:\n%s\n%s", body, s.proc.Log())
		}
	}
}

// restart stops ipledger and starts it again on the same database.
func (s *dexServer) restart(t *testing.T) {
	t.Helper()
	s.proc.Stop()
	s.start(t)
}

// call makes one REST request, with a bearer token when tok is set.
func call(t *testing.T, base, method, path, tok, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := mpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// grpcCode is the code of a gRPC call (the forge service's list of
// ExpectedMachines) made with tok: 0 when it succeeds.
func grpcCode(base, tok string) connect.Code {
	c := forgeconnect.NewForgeClient(mpClient, base, connect.WithGRPCWeb(), connect.WithInterceptors(connect.UnaryInterceptorFunc(
		func(next connect.UnaryFunc) connect.UnaryFunc {
			return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
				req.Header().Set("Authorization", "Bearer "+tok)
				return next(ctx, req)
			}
		})))
	if _, err := c.GetAllExpectedMachines(context.Background(), connect.NewRequest(&emptypb.Empty{})); err != nil {
		return connect.CodeOf(err)
	}
	return 0
}

// claimsOf reads a JWT's claims without verifying it.
func claimsOf(t *testing.T, tok string) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %d parts", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func createPool(t *testing.T, base, tok, name string) (int, string) {
	return call(t, base, "POST", "/api/v1/pools", tok, `{"name":"`+name+`","type":"integer","ranges":[{"first":"1","last":"9"}]}`)
}

// lastActor is the actor of the newest event of action.
func lastActor(t *testing.T, base, action string) string {
	t.Helper()
	code, body := call(t, base, "GET", "/api/v1/events?action="+action, mpAdminToken, "")
	var page struct {
		Items []struct {
			Actor string `json:"actor"`
		} `json:"items"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &page) != nil || len(page.Items) == 0 {
		t.Fatalf("events %s: %d %s", action, code, body)
	}
	return page.Items[len(page.Items)-1].Actor
}

// TestDexBearerTokens: Dex's tokens are API credentials on REST and gRPC,
// though Dex shapes its access tokens like ID tokens (at_hash): the
// password grant's access and ID tokens for ipledger's own client, and a
// script client's tokens addressed to ipledger (the cross-client scope
// audience:server:client_id:ipledger, which ipledger's client trusts);
// roles come from the groups Dex sends. A token for another audience is
// refused.
func TestDexBearerTokens(t *testing.T) {
	t.Parallel()
	s := startDexSite(t)
	scopes := []string{"openid", "profile", "email", "groups"}
	own := s.dex.PasswordGrant(t, "ipledger", "ipledger-client-secret-change-me", "alice@site.example", idpkit.AlicePassword, scopes...)
	if c := claimsOf(t, own.AccessToken); c["at_hash"] == nil {
		t.Fatalf("Dex's access token no longer carries at_hash (the shape this test is about): %v", c)
	}
	cross := s.dex.PasswordGrant(t, idpkit.ScriptsClient, idpkit.ScriptsSecret, "alice@site.example", idpkit.AlicePassword,
		append(scopes, "audience:server:client_id:ipledger")...)
	if c := claimsOf(t, cross.AccessToken); c["azp"] != idpkit.ScriptsClient || !strings.Contains(jsonOf(c["aud"]), `"ipledger"`) {
		t.Fatalf("the cross-client token: %v", c)
	}
	for i, tok := range map[string]string{"access token": own.AccessToken, "ID token of the password grant": own.IDToken,
		"cross-client access token": cross.AccessToken, "cross-client ID token": cross.IDToken} {
		pool := "dex-" + strings.ReplaceAll(strings.ReplaceAll(i, " ", "-"), "cross-client", "cc")
		if code, body := createPool(t, s.url, tok, pool); code != http.StatusCreated {
			t.Fatalf("%s on REST: %d %s", i, code, body)
		}
		if a := lastActor(t, s.url, "pool.create"); a != "user:alice" {
			t.Fatalf("%s: the pool was created by %s", i, a)
		}
		if code := grpcCode(s.url, tok); code != 0 {
			t.Fatalf("%s on gRPC: %v", i, code)
		}
	}
	// bob's group (noc) gives viewer: he reads, he may not write.
	bob := s.dex.PasswordGrant(t, idpkit.ScriptsClient, idpkit.ScriptsSecret, "bob@site.example", idpkit.BobPassword,
		append(scopes, "audience:server:client_id:ipledger")...)
	if code, body := call(t, s.url, "GET", "/api/v1/pools", bob.AccessToken, ""); code != http.StatusOK {
		t.Fatalf("bob reading: %d %s", code, body)
	}
	if code, _ := createPool(t, s.url, bob.AccessToken, "by-bob"); code != http.StatusForbidden {
		t.Fatalf("bob writing: %d, want 403", code)
	}
	// The script client's own token is addressed to it, not to ipledger.
	other := s.dex.PasswordGrant(t, idpkit.ScriptsClient, idpkit.ScriptsSecret, "alice@site.example", idpkit.AlicePassword, scopes...)
	if code, body := call(t, s.url, "GET", "/api/v1/pools", other.AccessToken, ""); code != http.StatusUnauthorized || !strings.Contains(body, "audience") {
		t.Fatalf("a token for another audience: %d %s", code, body)
	}
	if code := grpcCode(s.url, other.AccessToken); code != connect.CodeUnauthenticated {
		t.Fatalf("a token for another audience on gRPC: %v", code)
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestDexConsoleSignIn: a person signs in to the console through Dex's
// own login page (PKCE, state and nonce; no consent screen) and lands as
// user:alice with the admin role. The ID token ipledger received at that
// sign-in is refused as a bearer token on REST and gRPC — while the
// session lives, after sign-out, and after ipledger restarts — while a
// token Dex gave a script keeps working.
func TestDexConsoleSignIn(t *testing.T) {
	t.Parallel()
	s := startDexSite(t)
	ctx := browserkit.New(t, 1280, 860)
	js := browserkit.JSString
	browserkit.Run(t, ctx, "the login page offers Dex",
		chromedp.Navigate(s.url+"/pools"),
		browserkit.Poll(`document.querySelector("#sso") !== null && document.querySelector("#sso").innerText.includes("Dex")`),
	)
	browserkit.Run(t, ctx, "Dex's login page",
		chromedp.Click(chromedp.CSS(`#sso`)),
		browserkit.Poll(`location.href.startsWith(`+js(s.dex.Issuer)+`) && document.querySelector("#login") !== null`),
		chromedp.SendKeys(chromedp.CSS(`#login`), "alice@site.example"),
		chromedp.SendKeys(chromedp.CSS(`#password`), idpkit.AlicePassword),
	)
	browserkit.Run(t, ctx, "back in the console as alice, admin",
		chromedp.Click(chromedp.CSS(`#submit-login`)),
		browserkit.Poll(`location.href === `+js(s.url+"/pools")+` && /user:alice\s*admin/.test(document.querySelector(".who").innerText)`),
	)
	received := s.dex.Received("ipledger")
	if len(received) != 1 {
		t.Fatalf("Dex gave ipledger %d ID tokens for one sign-in", len(received))
	}
	signIn := received[0]
	if c := claimsOf(t, signIn); c["nonce"] == nil || c["at_hash"] == nil || c["preferred_username"] != "alice" {
		t.Fatalf("the sign-in's ID token: %v", c)
	}
	script := s.dex.PasswordGrant(t, idpkit.ScriptsClient, idpkit.ScriptsSecret, "alice@site.example", idpkit.AlicePassword,
		"openid", "profile", "email", "groups", "audience:server:client_id:ipledger")
	check := func(when string) {
		t.Helper()
		code, body := call(t, s.url, "GET", "/api/v1/pools", signIn, "")
		if code != http.StatusUnauthorized || !strings.Contains(body, "console sign-in") {
			t.Fatalf("the sign-in's ID token %s on REST: %d %s", when, code, body)
		}
		if code := grpcCode(s.url, signIn); code != connect.CodeUnauthenticated {
			t.Fatalf("the sign-in's ID token %s on gRPC: %v", when, code)
		}
		if code, body := call(t, s.url, "GET", "/api/v1/pools", script.AccessToken, ""); code != http.StatusOK {
			t.Fatalf("a script's token %s: %d %s", when, code, body)
		}
	}
	check("while the session lives")
	browserkit.Run(t, ctx, "sign out (Dex has no end_session_endpoint: back to the login page)",
		chromedp.Click(chromedp.CSS(`.who button[type=submit]`)),
		browserkit.Poll(`location.href === `+js(s.url+"/login")),
		chromedp.Navigate(s.url+"/"),
		browserkit.Poll(`location.pathname === "/login"`),
	)
	if a := lastActor(t, s.url, "session.end"); a != "user:alice" {
		t.Fatalf("session.end by %s", a)
	}
	check("after sign-out")
	s.restart(t)
	check("after a restart")
	if !strings.Contains(s.proc.Log(), auth.ReceivedAtSignIn) {
		t.Fatal("the refusal is not in the log")
	}
}
