package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/auth/certtest"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/web"
)

// TestCLIOverTLS: the client commands reach an HTTPS server with
// --ca-cert, and authenticate with --client-cert/--client-key alone (no
// token) when the certificate is mapped to a role.
func TestCLIOverTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := certtest.NewCA(t, "site CA")
	srvCert := ca.Server(t, "ipledger")
	files := &auth.TLSFiles{CertFile: certtest.Write(t, dir, "tls.crt", srvCert.CertPEM), KeyFile: certtest.Write(t, dir, "tls.key", srvCert.KeyPEM),
		ClientCAFile: certtest.Write(t, dir, "client-ca.pem", ca.PEM)}
	if err := files.Load(); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := allocator.New(dbtest.Open(t, models.SQLite), allocator.Options{Logger: log})
	admin := "cli-tls-admin-token-0123456789"
	if _, err := auth.New(a.DB(), auth.Options{}).EnsureAdminToken(context.Background(), admin); err != nil {
		t.Fatal(err)
	}
	s := web.New(web.Config{Allocator: a, Logger: log, TLS: files, Identity: web.Identity{ClientRoles: auth.ClientRoles{"spiffe://site.example/ns/ops/sa/cli": auth.RoleAdmin}}})
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() { done <- s.Serve(ctx, "127.0.0.1:0", func(addr string) { ready <- addr }) }()
	t.Cleanup(func() { cancel(); <-done })
	url := "https://" + <-ready
	caFile := certtest.Write(t, dir, "ca.pem", ca.PEM)

	if _, err := runCLI(t, url, admin, "", "pool", "list"); err == nil {
		t.Fatal("the server's certificate was trusted without --ca-cert")
	}
	if out, err := runCLI(t, url, admin, "", "--ca-cert", caFile, "pool", "create", "vlan-id", "--type", "integer", "--range", "1-9"); err != nil {
		t.Fatalf("with --ca-cert and a token: %v\n%s", err, out)
	}
	me := ca.Client(t, "ops", "spiffe://site.example/ns/ops/sa/cli")
	cert, key := certtest.Write(t, dir, "me.pem", me.CertPEM), certtest.Write(t, dir, "me-key.pem", me.KeyPEM)
	out, err := runCLI(t, url, "", "", "--ca-cert", caFile, "--client-cert", cert, "--client-key", key, "pool", "list")
	if err != nil || !strings.Contains(out, "vlan-id") {
		t.Fatalf("with a client certificate and no token: %v\n%s", err, out)
	}
	if _, err := runCLI(t, url, "", "", "--ca-cert", caFile, "--client-cert", cert, "pool", "list"); err == nil || !strings.Contains(err.Error(), "--client-key") {
		t.Fatalf("--client-cert without --client-key: %v", err)
	}
}
