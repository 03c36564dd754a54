// Package serverkit serves the real web handler (web.New) over one test's
// database with httptest, with an admin token, optionally with the feed
// and the webhook worker running as serve runs them. It imports web, so
// only external test packages (web_test) and the commands' tests use it.
package serverkit

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/feed"
	"github.com/ipledger/ipledger/internal/testkit/sitekit"
	"github.com/ipledger/ipledger/web"
	"github.com/ipledger/ipledger/webhook"
)

// AdminTokenValue is the admin token of a Server unless Options.Admin
// names another.
const AdminTokenValue = "test-admin-token-0001"

// Options say how Start assembles the server.
type Options struct {
	// Allocator are the allocator's options; a silent logger when none.
	Allocator allocator.Options
	// Admin is the value of the admin token (AdminTokenValue when "").
	Admin string
	// Feed wires the change feed and the webhooks into the allocator, the
	// tokens and the server, and runs the sequencer and the delivery
	// worker with short polls until the test ends.
	Feed bool
}

// Server is the server under test: a site over its database, its
// services, and the httptest server in front of web.Server's handler.
type Server struct {
	*sitekit.Site
	Auth  *auth.Service
	Feed  *feed.Feed       // nil unless Options.Feed
	Hooks *webhook.Service // nil unless Options.Feed
	Web   *web.Server
	HTTP  *httptest.Server
	// URL is the server's base URL; Admin the admin token's value.
	URL, Admin string
}

// Start assembles and serves the server over db until the test ends.
func Start(t testing.TB, db *gorm.DB, o Options) *Server {
	t.Helper()
	if o.Allocator.Logger == nil {
		o.Allocator.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Admin == "" {
		o.Admin = AdminTokenValue
	}
	s := &Server{Admin: o.Admin}
	var authOpts auth.Options
	if o.Feed {
		s.Feed = feed.New(db, feed.Options{})
		s.Hooks = webhook.New(db, webhook.Options{OnCommit: s.Feed.Committed})
		s.Feed.SetDeliveries(s.Hooks)
		o.Allocator.OnCommit = s.Feed.Committed
		authOpts.OnCommit = s.Feed.Committed
	}
	s.Site = sitekit.New(t, db, o.Allocator)
	authOpts.Logger = o.Allocator.Logger
	s.Auth = auth.New(db, authOpts)
	AdminToken(t, s.Auth, o.Admin)
	cfg := web.Config{Allocator: s.A, DB: db, Auth: s.Auth, Logger: o.Allocator.Logger}
	if o.Feed {
		cfg.Feed, cfg.Webhooks = s.Feed, s.Hooks
	}
	s.Web = web.New(cfg)
	s.HTTP = httptest.NewServer(s.Web.Handler())
	s.URL = s.HTTP.URL
	if !o.Feed {
		t.Cleanup(s.HTTP.Close)
		return s
	}
	ctx, cancel := context.WithCancel(context.Background())
	fdone := s.Feed.RunFeed(ctx, feed.FeedOptions{Poll: 50 * time.Millisecond})
	hdone := s.Hooks.Run(ctx, webhook.WebhookOptions{BackoffBase: time.Millisecond, Poll: 20 * time.Millisecond})
	t.Cleanup(func() {
		// Long polls still open would hold Close until their wait ends.
		s.HTTP.CloseClientConnections()
		s.HTTP.Close()
		cancel()
		await(t, fdone, "the end of the feed's sequencer")
		await(t, hdone, "the end of the webhook engine")
	})
	return s
}

// AdminToken makes value an admin token of au's database.
func AdminToken(t testing.TB, au *auth.Service, value string) {
	t.Helper()
	if _, err := au.EnsureAdminToken(context.Background(), value); err != nil {
		t.Fatalf("admin token: %v", err)
	}
}

// await waits for done to close, failing the test (rather than hanging the
// package until its timeout) when it does not within a minute.
func await(t testing.TB, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Errorf("no %s within a minute", what)
	}
}
