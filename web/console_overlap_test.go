package web_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

// The dashboard and the NOC wallboard show an alert for address pools that
// overlap (kept from before the rule), naming both pools and ranges.
func TestConsoleOverlapAlert(t *testing.T) {
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
	a := allocator.New(db, allocator.Options{})
	ctx := audit.WithActor(context.Background(), "test", "")
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
	if err := db.Exec(`UPDATE pool_ranges SET first_key = (SELECT first_key FROM pool_ranges WHERE first_value = '10.1.0.1'), first_value = '10.1.0.1'
		WHERE first_value = '10.2.0.1'`).Error; err != nil {
		t.Fatal(err)
	}
	site := newConsoleSite(t, dbtest.OpenURL(t, u))
	b := site.login(auth.RoleViewer)
	for _, page := range []string{"/", "/noc"} {
		expect(t, b.get(page), http.StatusOK, "Address pools overlap", "10.1.0.1..10.1.0.50", "10.1.0.1..10.2.0.9", "lo-ip", "mgmt")
	}
}
