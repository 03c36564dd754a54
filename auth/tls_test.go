package auth

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/ipledger/ipledger/auth/certtest"
)

// serveTLS serves h with f's configuration and returns its address.
func serveTLS(t *testing.T, f *TLSFiles, h http.Handler) string {
	t.Helper()
	if err := f.Load(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, TLSConfig: f.Config()}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func servedCN(t *testing.T, addr string, ca *certtest.CA) string {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// TestTLSCertificateSwappedWhileRunning: a renewed certificate written
// over the files is served by the next handshake, without a restart; a
// half-written file keeps the previous one in use.
func TestTLSCertificateSwappedWhileRunning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := certtest.NewCA(t, "site CA")
	first := ca.Server(t, "first")
	f := &TLSFiles{CertFile: certtest.Write(t, dir, "tls.crt", first.CertPEM), KeyFile: certtest.Write(t, dir, "tls.key", first.KeyPEM)}
	addr := serveTLS(t, f, http.NotFoundHandler())
	if cn := servedCN(t, addr, ca); cn != "first" {
		t.Fatalf("serving %q", cn)
	}
	second := ca.Server(t, "second")
	certtest.Write(t, dir, "tls.key", second.KeyPEM)
	certtest.Write(t, dir, "tls.crt", second.CertPEM)
	deadline := time.Now().Add(20 * time.Second)
	for servedCN(t, addr, ca) != "second" {
		if time.Now().After(deadline) {
			t.Fatal("the renewed certificate is not served")
		}
		time.Sleep(50 * time.Millisecond) // files are looked at once a second
	}
	// A broken write (a key that does not match) keeps "second".
	third := ca.Server(t, "third")
	if err := os.WriteFile(f.CertFile, third.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(certCheckEvery + 100*time.Millisecond)
	if cn := servedCN(t, addr, ca); cn != "second" {
		t.Fatalf("a mismatched pair replaced the certificate: serving %q", cn)
	}
}

// TestClientCertificates: a certificate from the client CA is mapped by
// its URI SAN (SPIFFE id) or CN to a role; a verified but unmapped one is
// refused; one from another CA fails the handshake; none at all is let
// through to the other ways of signing in.
func TestClientCertificates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := certtest.NewCA(t, "site CA")
	other := certtest.NewCA(t, "another CA")
	srvCert := ca.Server(t, "ipledger")
	roles, err := ParseClientRoles("spiffe://site.example/ns/forge/sa/site-explorer=operator, noc-board=viewer")
	if err != nil {
		t.Fatal(err)
	}
	f := &TLSFiles{CertFile: certtest.Write(t, dir, "tls.crt", srvCert.CertPEM), KeyFile: certtest.Write(t, dir, "tls.key", srvCert.KeyPEM),
		ClientCAFile: certtest.Write(t, dir, "client-ca.pem", ca.PEM)}
	addr := serveTLS(t, f, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, err := roles.Identify(r.TLS)
		var ce *CertError
		switch {
		case errors.As(err, &ce):
			http.Error(w, err.Error(), http.StatusForbidden)
		case who == nil:
			_, _ = io.WriteString(w, "anonymous")
		default:
			_, _ = io.WriteString(w, who.Actor+" "+string(who.Role))
		}
	}))
	get := func(cert *certtest.Leaf) (int, string, error) {
		cfg := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
		if cert != nil {
			// Sent whatever CAs the server asks for (Go's client would
			// otherwise keep back a certificate of another CA).
			tc := cert.TLS(t)
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &tc, nil }
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}, Timeout: 10 * time.Second}
		resp, err := c.Get("https://" + addr + "/")
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.ProtoMajor != 2 {
			t.Errorf("served over %s, want HTTP/2", resp.Proto)
		}
		return resp.StatusCode, string(b), nil
	}
	for _, c := range []struct {
		name string
		cert certtest.Leaf
		code int
		body string
	}{
		{"SPIFFE id", ca.Client(t, "site-explorer-7f9c", "spiffe://site.example/ns/forge/sa/site-explorer"), 200, "cert:spiffe://site.example/ns/forge/sa/site-explorer operator"},
		{"CN", ca.Client(t, "noc-board", ""), 200, "cert:noc-board viewer"},
		{"URI SAN wins over a mapped CN", ca.Client(t, "noc-board", "spiffe://site.example/ns/forge/sa/other"), 403, ""},
		{"unmapped", ca.Client(t, "laptop", ""), 403, ""},
	} {
		code, body, err := get(&c.cert)
		if err != nil || code != c.code || (c.body != "" && body != c.body) {
			t.Errorf("%s: %d %q %v, want %d %q", c.name, code, body, err, c.code, c.body)
		}
	}
	if code, body, err := get(nil); err != nil || code != 200 || body != "anonymous" {
		t.Errorf("no certificate: %d %q %v", code, body, err)
	}
	foreign := other.Client(t, "noc-board", "spiffe://site.example/ns/forge/sa/site-explorer")
	if code, body, err := get(&foreign); err == nil {
		t.Errorf("a certificate from another CA passed the handshake: %d %q", code, body)
	}
}

func TestParseClientRoles(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"x", "=admin", "a=root", "a=admin,a=viewer"} {
		if _, err := ParseClientRoles(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	m, err := ParseClientRoles("spiffe://s/x=y=admin")
	if err != nil || m["spiffe://s/x=y"] != RoleAdmin {
		t.Errorf("last = splits: %v %v", m, err)
	}
}
