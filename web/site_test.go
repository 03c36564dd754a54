package web

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
)

// apiSite is the start of most API tests: an allocator on the test's own
// database, an admin token and the server's handler.
type apiSite struct {
	a     *allocator.Allocator
	srv   *Server
	h     http.Handler
	admin string
}

// newAPISite assembles an apiSite; opts.Logger defaults to a silent one.
// The admin token's value is admin.
func newAPISite(t *testing.T, db *gorm.DB, opts allocator.Options, admin string) *apiSite {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	a := allocator.New(db, opts)
	au := auth.New(a.DB(), auth.Options{})
	if _, err := au.EnsureAdminToken(context.Background(), admin); err != nil {
		t.Fatal(err)
	}
	srv := New(Config{Allocator: a, Logger: opts.Logger})
	return &apiSite{a: a, srv: srv, h: srv.Handler(), admin: admin}
}
