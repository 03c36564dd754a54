package idpkit

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The addresses of docs/examples/identity that the tests replace.
const (
	ExampleDex      = "http://dex.site.example:5556"
	ExampleDexBind  = "0.0.0.0:5556"
	ExampleIPLedger = "http://ipledger.site.example:8080"
	ExampleProxy    = "http://ipledger.site.example:4180"
)

// The example's people and clients (docs/examples/identity/dex.yaml).
const (
	AlicePassword = "alice-password"
	BobPassword   = "bob-password"
	ScriptsClient = "ipam-scripts"
	ScriptsSecret = "ipam-scripts-secret-change-me"
)

// Dex is a running Dex. Its issuer is served through a recorder that
// keeps the ID tokens Dex gives a client in exchange for a code: the ID
// tokens a relying party (ipledger, oauth2-proxy) received at its
// sign-ins, which a test cannot see otherwise.
type Dex struct {
	// Issuer is Dex's issuer URL (the recorder's origin and /dex).
	Issuer  string
	Process *Process

	mu       sync.Mutex
	received map[string][]string
}

// StartDex runs Dex with docs/examples/identity/dex.yaml, the example's
// addresses replaced: its issuer, its listening address, and the redirect
// URIs of ipledger (ipledgerOrigin) and of oauth2-proxy (proxyOrigin).
func StartDex(t testing.TB, bins Binaries, ipledgerOrigin, proxyOrigin string) *Dex {
	t.Helper()
	dir := t.TempDir()
	front, back := FreePort(t), FreePort(t)
	d := &Dex{Issuer: Origin(front) + "/dex", received: map[string][]string{}}
	cfg := Example(t, "dex.yaml", map[string]string{
		ExampleDex: Origin(front), ExampleDexBind: "127.0.0.1:" + strconv.Itoa(back),
		ExampleIPLedger: ipledgerOrigin, ExampleProxy: proxyOrigin,
	})
	if err := os.WriteFile(filepath.Join(dir, "dex.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse(Origin(back))
	rp := httputil.NewSingleHostReverseProxy(target)
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(front))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: d.record(rp), ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	d.Process = Start(t, "dex", dir, bins.Dex, nil, "serve", "dex.yaml")
	d.Process.WaitHTTP(t, d.Issuer+"/.well-known/openid-configuration")
	return d
}

// record passes every request to Dex, and keeps the ID token of each
// answer to a code exchange at the token endpoint, by client id.
func (d *Dex) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/dex/token" {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		form, _ := url.ParseQuery(string(body))
		client, _, ok := r.BasicAuth()
		if !ok {
			client = form.Get("client_id")
		}
		rec := &capture{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		var tr struct {
			IDToken string `json:"id_token"`
		}
		if form.Get("grant_type") == "authorization_code" && json.Unmarshal(rec.body.Bytes(), &tr) == nil && tr.IDToken != "" {
			if c, err := url.QueryUnescape(client); err == nil {
				client = c
			}
			d.mu.Lock()
			d.received[client] = append(d.received[client], tr.IDToken)
			d.mu.Unlock()
		}
	})
}

type capture struct {
	http.ResponseWriter
	body bytes.Buffer
}

func (c *capture) Write(b []byte) (int, error) {
	c.body.Write(b)
	return c.ResponseWriter.Write(b)
}

// Received is the ID tokens Dex gave client in exchange for a code, in
// order.
func (d *Dex) Received(client string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.received[client]...)
}

// Tokens are what Dex's token endpoint answered.
type Tokens struct {
	IDToken     string `json:"id_token"`
	AccessToken string `json:"access_token"`
}

// PasswordGrant gets tokens from Dex as client with a person's email and
// password (the password grant of docs/identity.md "Dex").
func (d *Dex) PasswordGrant(t testing.TB, client, secret, email, password string, scopes ...string) Tokens {
	t.Helper()
	form := url.Values{"grant_type": {"password"}, "username": {email}, "password": {password}, "scope": {strings.Join(scopes, " ")}}
	req, err := http.NewRequestWithContext(Ctx(t), http.MethodPost, d.Issuer+"/token", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(client), url.QueryEscape(secret))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var tok Tokens
	if res.StatusCode != http.StatusOK || json.Unmarshal(body, &tok) != nil || tok.AccessToken == "" {
		t.Fatalf("Dex's password grant for %s as %s: %s %s", email, client, res.Status, body)
	}
	return tok
}
