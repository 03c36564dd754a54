package idpkit

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The addresses of the oauth2-proxy example that the tests replace:
// where the proxy listens, and ipledger's address behind it with the
// proxy's own address, the only one ipledger trusts.
const (
	ExampleProxyBind      = "0.0.0.0:4180"
	ExampleBehindProxy    = "10.0.0.20:8080"
	ExampleProxyOwnPrefix = "10.0.0.10/32"
)

// StartOAuth2Proxy runs oauth2-proxy with docs/examples/identity/
// oauth2-proxy.cfg on 127.0.0.1:port, signing people in with dex and
// passing requests to ipledger at upstream (host:port).
func StartOAuth2Proxy(t testing.TB, bins Binaries, dex *Dex, port int, upstream string) *Process {
	t.Helper()
	dir := t.TempDir()
	cfg := Example(t, "oauth2-proxy.cfg", map[string]string{
		ExampleDex: strings.TrimSuffix(dex.Issuer, "/dex"), ExampleProxyBind: "127.0.0.1:" + strconv.Itoa(port),
		ExampleProxy: Origin(port), ExampleBehindProxy: upstream,
	})
	if err := os.WriteFile(filepath.Join(dir, "oauth2-proxy.cfg"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := Start(t, "oauth2-proxy", dir, bins.OAuth2Proxy, nil, "--config=oauth2-proxy.cfg")
	p.WaitHTTP(t, Origin(port)+"/ping")
	return p
}
