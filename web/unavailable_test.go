package web

// A request whose deadline passes while the database works on it — the
// query is cancelled and the driver drops the connection mid-transaction —
// is 503 unavailable, never a 500, and changes nothing
// half-way: every allocation that was answered 201 is stored, and nothing
// that was answered 503 is.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
)

func TestDeadlineMidTransactionIs503(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		quiet := slog.New(slog.NewJSONHandler(io.Discard, nil))
		a := allocator.New(db, allocator.Options{Logger: quiet})
		au := auth.New(a.DB(), auth.Options{})
		const tok = "deadline-test-admin-token-0123456789"
		if _, err := au.EnsureAdminToken(ctx, tok); err != nil {
			t.Fatal(err)
		}
		if _, err := a.CreatePool(ctx, allocator.PoolSpec{Name: "p", Type: "integer", Ranges: []allocator.RangeSpec{{First: "1", Last: "100000"}}}); err != nil {
			t.Fatal(err)
		}
		ok, unavailable := map[string]string{}, map[string]bool{}
		// Deadlines from far too short to long enough, so that some land
		// before, some inside and some after the transaction.
		for _, d := range []time.Duration{time.Millisecond, 3 * time.Millisecond, 6 * time.Millisecond, 12 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond, time.Second} {
			srv := New(Config{Allocator: a, Logger: quiet, RequestTimeout: d}).Handler()
			for i := 0; i < 40; i++ {
				owner := fmt.Sprintf("o-%v-%d", d, i)
				req := httptest.NewRequest("POST", "/api/v1/pools/p/allocations", strings.NewReader(`{"owner_type":"t","owner_id":"`+owner+`"}`))
				req.Header.Set("Authorization", "Bearer "+tok)
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				srv.ServeHTTP(rec, req)
				switch rec.Code {
				case http.StatusCreated:
					var al struct{ Value string }
					_ = json.Unmarshal(rec.Body.Bytes(), &al)
					ok[owner] = al.Value
				case http.StatusServiceUnavailable:
					if !strings.Contains(rec.Body.String(), `"code":"unavailable"`) {
						t.Fatalf("deadline %v: 503 without code unavailable: %s", d, rec.Body)
					}
					unavailable[owner] = true
				default:
					t.Fatalf("deadline %v: %d %s, want 201 or 503", d, rec.Code, rec.Body)
				}
			}
		}
		if len(ok) == 0 {
			t.Fatal("no allocation succeeded even with a 1 s deadline")
		}
		for owner, value := range ok {
			al, err := a.ListAllocations(ctx, "p", allocator.AllocationFilter{OwnerType: "t", OwnerID: owner})
			if err != nil || len(al.Items) != 1 || al.Items[0].Value != value {
				t.Fatalf("acknowledged %s=%s not stored: %+v %v", owner, value, al, err)
			}
		}
		// A 503 may have committed just before the deadline hit the
		// answer; it is then held by its own owner only (a retry returns
		// it). Nothing else may exist.
		var n int64
		db.Raw(`SELECT COUNT(*) FROM allocations`).Scan(&n)
		if n < int64(len(ok)) || n > int64(len(ok)+len(unavailable)) {
			t.Fatalf("%d allocations stored for %d acknowledged and %d unavailable requests", n, len(ok), len(unavailable))
		}
		t.Logf("%d acknowledged, %d answered 503", len(ok), len(unavailable))
	})
}
