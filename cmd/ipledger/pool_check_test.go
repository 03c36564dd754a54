package main

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/web"
)

// `ipledger pool check` lists the overlapping address pools a database
// kept from before the rule and exits non-zero while any remain; on a
// clean site it says so and exits 0. An `ipledger address` look-up takes
// the host prefix form.
func TestPoolCheckCLI(t *testing.T) {
	t.Parallel()
	u := dbtest.NewSQLiteURL(t)
	db, _, err := database.Open(u)
	if err != nil {
		t.Fatal(err)
	}
	if s, e := db.DB(); e == nil {
		defer s.Close()
	}
	if err := models.MigrateTo(db, 11); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a := allocator.New(db, allocator.Options{})
	au := auth.New(a.DB(), auth.Options{})
	const tok = "cli-pool-check-admin"
	if _, err := au.EnsureAdminToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	for _, p := range []allocator.PoolSpec{
		{Name: "lo-ip", Type: "ipv4", Ranges: []allocator.RangeSpec{{First: "10.1.0.1", Last: "10.1.0.50"}}},
		{Name: "mgmt", Type: "ipv4", Ranges: []allocator.RangeSpec{{First: "10.2.0.1", Last: "10.2.0.9"}}},
	} {
		// Today's CreatePool writes at schema 11; its answer reads range
		// counts that later migrations added, so the rows are checked.
		_, err := a.CreatePool(ctx, p)
		var n int64
		if e := db.Raw(`SELECT COUNT(*) FROM pool_ranges r JOIN pools p ON p.id = r.pool_id WHERE p.name = ?`, p.Name).Scan(&n).Error; e != nil || n != 1 {
			t.Fatalf("create pool %s at schema 11: %v; ranges stored: %d (%v)", p.Name, err, n, e)
		}
	}
	// mgmt moved over lo-ip before the rule existed.
	if err := db.Exec(`UPDATE pool_ranges SET first_key = (SELECT first_key FROM pool_ranges WHERE first_value = '10.1.0.1'), first_value = '10.1.0.1'
		WHERE first_value = '10.2.0.1'`).Error; err != nil {
		t.Fatal(err)
	}
	if err := models.Migrate(db); err != nil {
		t.Fatal(err)
	}
	db = dbtest.OpenURL(t, u)
	a = allocator.New(db, allocator.Options{})
	au = auth.New(a.DB(), auth.Options{})
	srv := httptest.NewServer(web.New(web.Config{Allocator: a, Auth: au, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler())
	defer srv.Close()

	out, err := runCLI(t, srv.URL, tok, "", "pool", "check")
	if err == nil || !strings.Contains(out, "lo-ip") || !strings.Contains(out, "mgmt") || !strings.Contains(out, "10.1.0.1..10.1.0.50") {
		t.Fatalf("pool check with an overlap: %v\n%s", err, out)
	}
	p, _ := a.GetPool(ctx, "mgmt")
	if err := a.RemoveRange(ctx, "mgmt", p.Ranges[0].ID); err != nil {
		t.Fatal(err)
	}
	out, err = runCLI(t, srv.URL, tok, "", "pool", "check")
	if err != nil || !strings.Contains(out, "no overlapping address pools") {
		t.Fatalf("pool check on a clean site: %v\n%s", err, out)
	}
	out, err = runCLI(t, srv.URL, tok, "", "address", "10.1.0.7/32")
	if err != nil || !strings.Contains(out, "lo-ip") {
		t.Fatalf("address with /32: %v\n%s", err, out)
	}
	if out, err := runCLI(t, srv.URL, tok, "", "address", "10.1.0.7/24"); err == nil {
		t.Fatalf("address with /24 accepted:\n%s", out)
	}
}
