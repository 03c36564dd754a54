package web_test

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/emptypb"
	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/auth/certtest"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/proto/gen/forge/forgeconnect"
	"github.com/ipledger/ipledger/web"
)

const explorerID = "spiffe://site.example/ns/forge/sa/site-explorer"

// tlsSite is `ipledger serve --tls-cert --tls-key --tls-client-ca` on a
// loopback port.
type tlsSite struct {
	base   string
	ca     *certtest.CA
	files  *auth.TLSFiles
	dir    string
	a      *allocator.Allocator
	admin  string
	cancel context.CancelFunc
}

func newTLSSite(t *testing.T, db *gorm.DB) *tlsSite {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "site CA")
	srvCert := ca.Server(t, "first")
	files := &auth.TLSFiles{CertFile: certtest.Write(t, dir, "tls.crt", srvCert.CertPEM), KeyFile: certtest.Write(t, dir, "tls.key", srvCert.KeyPEM),
		ClientCAFile: certtest.Write(t, dir, "client-ca.pem", ca.PEM), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := files.Load(); err != nil {
		t.Fatal(err)
	}
	roles, err := auth.ParseClientRoles(explorerID + "=operator,noc-board=viewer")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := allocator.New(db, allocator.Options{Logger: log})
	au := auth.New(db, auth.Options{Logger: log})
	admin := "tls-test-admin-token-0123456789"
	if _, err := au.EnsureAdminToken(context.Background(), admin); err != nil {
		t.Fatal(err)
	}
	s := web.New(web.Config{Allocator: a, Auth: au, Logger: log, TLS: files, SecureCookies: true, Identity: web.Identity{ClientRoles: roles}})
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, "127.0.0.1:0", func(addr string) { ready <- addr }) }()
	t.Cleanup(func() { cancel(); <-done })
	return &tlsSite{base: "https://" + <-ready, ca: ca, files: files, dir: dir, a: a, admin: admin, cancel: cancel}
}

// client is an HTTPS client trusting the site's CA, presenting cert
// (whatever CA the server asks for) when it is not nil.
func (s *tlsSite) client(t *testing.T, cert *certtest.Leaf) *http.Client {
	cfg := &tls.Config{RootCAs: s.ca.Pool()}
	if cert != nil {
		tc := cert.TLS(t)
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &tc, nil }
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}}
}

func (s *tlsSite) call(t *testing.T, c *http.Client, method, path, bearer, body string) (int, string, error) {
	req, _ := http.NewRequest(method, s.base+path, strings.NewReader(body))
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), nil
}

// TestTLSClientCertificates: HTTPS and gRPC on one listener; a client
// certificate from the site's CA authenticates its holder by SPIFFE id or
// CN; an unmapped one is 403; one from another CA fails the handshake.
func TestTLSClientCertificates(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		t.Parallel()
		s := newTLSSite(t, db)
		anon := s.client(t, nil)
		if code, body, err := s.call(t, anon, "POST", "/api/v1/pools", s.admin, `{"name":"vlan-id","type":"integer","ranges":[{"first":"100","last":"200"}]}`); err != nil || code != 201 {
			t.Fatalf("create pool over HTTPS: %d %s %v", code, body, err)
		}
		if code, _, err := s.call(t, anon, "GET", "/api/v1/pools", "", ""); err != nil || code != http.StatusUnauthorized {
			t.Fatalf("no certificate, no token: %d %v", code, err)
		}
		explorer := s.ca.Client(t, "site-explorer-7f9c", explorerID)
		code, body, err := s.call(t, s.client(t, &explorer), "POST", "/api/v1/pools/vlan-id/allocations", "", `{"owner_type":"network","owner_id":"n1"}`)
		if err != nil || code != http.StatusCreated {
			t.Fatalf("allocate with the SPIFFE certificate: %d %s %v", code, body, err)
		}
		var actor string
		db.Raw(`SELECT actor FROM audit_events WHERE action = 'allocation.create' ORDER BY id DESC LIMIT 1`).Scan(&actor)
		if actor != "cert:"+explorerID {
			t.Fatalf("audit actor %q", actor)
		}
		board := s.ca.Client(t, "noc-board", "")
		if code, _, _ := s.call(t, s.client(t, &board), "GET", "/api/v1/pools", "", ""); code != 200 {
			t.Fatalf("CN-mapped viewer read: %d", code)
		}
		if code, _, _ := s.call(t, s.client(t, &board), "POST", "/api/v1/pools/vlan-id/allocations", "", `{"owner_type":"network","owner_id":"n2"}`); code != http.StatusForbidden {
			t.Fatalf("CN-mapped viewer write: %d", code)
		}
		laptop := s.ca.Client(t, "laptop", "spiffe://site.example/ns/dev/sa/laptop")
		if code, body, _ := s.call(t, s.client(t, &laptop), "GET", "/api/v1/pools", "", ""); code != http.StatusForbidden || !strings.Contains(body, "not mapped") {
			t.Fatalf("unmapped certificate: %d %s", code, body)
		}
		foreign := certtest.NewCA(t, "another CA").Client(t, "noc-board", explorerID)
		if code, _, err := s.call(t, s.client(t, &foreign), "GET", "/api/v1/pools", "", ""); err == nil {
			t.Fatalf("a certificate of another CA was let in: %d", code)
		}

		// REST speaks HTTP/2, chosen by ALPN.
		res, err := anon.Get(s.base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.ProtoMajor != 2 || res.TLS == nil || res.TLS.NegotiatedProtocol != "h2" {
			t.Fatalf("REST over TLS: %s, ALPN %q, want HTTP/2 (h2)", res.Proto, alpn(res))
		}

		// gRPC over HTTP/2 on the same listener, authenticated by the
		// certificate.
		seen := &protoRecorder{base: s.client(t, &explorer).Transport}
		fc := forgeconnect.NewForgeClient(&http.Client{Transport: seen}, s.base, connect.WithGRPC())
		if _, err := fc.GetAllExpectedMachines(context.Background(), connect.NewRequest(&emptypb.Empty{})); err != nil {
			t.Fatalf("gRPC with the SPIFFE certificate: %v", err)
		}
		if got := seen.String(); got != "HTTP/2.0 h2 "+strings.TrimPrefix(s.base, "https://") {
			t.Fatalf("gRPC went %q, want HTTP/2.0 h2 to the REST listener %s", got, s.base)
		}
		fl := forgeconnect.NewForgeClient(s.client(t, &laptop), s.base, connect.WithGRPC())
		if _, err := fl.GetAllExpectedMachines(context.Background(), connect.NewRequest(&emptypb.Empty{})); connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Fatalf("gRPC with an unmapped certificate: %v", err)
		}
	})
}

func alpn(res *http.Response) string {
	if res.TLS == nil {
		return "(no TLS)"
	}
	return res.TLS.NegotiatedProtocol
}

// protoRecorder records the protocol, ALPN and host of each answer it
// carries.
type protoRecorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	seen []string
}

func (p *protoRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := p.base.RoundTrip(r)
	if err == nil {
		p.mu.Lock()
		p.seen = append(p.seen, res.Proto+" "+alpn(res)+" "+r.URL.Host)
		p.mu.Unlock()
	}
	return res, err
}

func (p *protoRecorder) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.seen, "; ")
}

// TestTLSCertificateRenewedWhileServing: a renewed certificate written
// over the files is served to new connections without a restart.
func TestTLSCertificateRenewedWhileServing(t *testing.T) {
	t.Parallel()
	s := newTLSSite(t, dbtest.Open(t, "sqlite"))
	cn := func() string {
		c, err := tls.Dial("tcp", strings.TrimPrefix(s.base, "https://"), &tls.Config{RootCAs: s.ca.Pool(), ServerName: "127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := cn(); got != "first" {
		t.Fatalf("serving %q", got)
	}
	renewed := s.ca.Server(t, "renewed")
	certtest.Write(t, s.dir, "tls.key", renewed.KeyPEM)
	certtest.Write(t, s.dir, "tls.crt", renewed.CertPEM)
	deadline := time.Now().Add(20 * time.Second)
	for cn() != "renewed" {
		if time.Now().After(deadline) {
			t.Fatal("the renewed certificate is not served")
		}
		time.Sleep(100 * time.Millisecond) // the files are looked at once a second
	}
}
