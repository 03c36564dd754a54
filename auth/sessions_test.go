package auth

import (
	"bytes"
	"context"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

// TestConsoleSessionKeyIsSharedAndCreatedOnce: ten processes (allocators)
// starting at once on one database all get the same 32-byte key.
func TestConsoleSessionKeyIsSharedAndCreatedOnce(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		keys := make([][]byte, 10)
		var wg sync.WaitGroup
		for i := range keys {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				k, err := New(db, Options{}).SessionKey(context.Background())
				if err != nil {
					t.Errorf("SessionKey: %v", err)
				}
				keys[i] = k
			}(i)
		}
		wg.Wait()
		for i, k := range keys {
			if len(k) != 32 || !bytes.Equal(k, keys[0]) {
				t.Fatalf("key %d = %x, want the shared 32-byte key %x", i, k, keys[0])
			}
		}
		var n int64
		db.Model(&models.Setting{}).Where("key = ?", sessionKeySetting).Count(&n)
		if n != 1 {
			t.Fatalf("%d key rows, want 1", n)
		}
		var ev int64
		db.Model(&models.AuditEvent{}).Where("after_json LIKE ? OR before_json LIKE ?",
			"%"+hex.EncodeToString(keys[0])+"%", "%"+hex.EncodeToString(keys[0])+"%").Count(&ev)
		if ev != 0 {
			t.Fatal("the session key leaked into the audit log")
		}
	})
}

// TestConsoleTokenByID: a token is found by id with its current role; a
// deleted one is 401.
func TestConsoleTokenByID(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		a := New(db, Options{})
		ctx := context.Background()
		v, err := a.CreateToken(ctx, "alice", RoleOperator, "")
		if err != nil {
			t.Fatal(err)
		}
		tok, err := a.Authenticate(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := a.TokenByID(ctx, tok.ID)
		if err != nil || got.Name != "alice" || got.Role != RoleOperator {
			t.Fatalf("TokenByID = %+v, %v", got, err)
		}
		db.Model(&models.APIToken{}).Where("id = ?", tok.ID).Update("role", string(RoleViewer))
		if got, _ := a.TokenByID(ctx, tok.ID); got.Role != RoleViewer {
			t.Fatalf("role change not seen: %+v", got)
		}
		db.Exec(`DELETE FROM api_tokens WHERE id = ?`, tok.ID)
		if _, err := a.TokenByID(ctx, tok.ID); err == nil {
			t.Fatal("deleted token still found")
		} else if e, ok := fault.AsError(err); !ok || e.Code != fault.CodeUnauthorized {
			t.Fatalf("deleted token: %v, want 401 unauthorized", err)
		}
	})
}

// TestConsoleSessionsDieWithTheirToken: sessions opened concurrently with
// the deletion of their token never outlive it (the foreign key and the
// delete in one transaction), on both databases; DeleteSession ends one
// session only; an expired session is refused; a session row's id must be
// a 64-character hash and expire after it was created (CHECKs).
func TestConsoleSessionsDieWithTheirToken(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		var mu sync.Mutex
		a := New(db, Options{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
		if _, err := a.CreateToken(ctx, "wall", RoleViewer, "wall-token-0123456789"); err != nil {
			t.Fatal(err)
		}
		tok, err := a.Authenticate(ctx, "wall-token-0123456789")
		if err != nil {
			t.Fatal(err)
		}
		s1, _, err := a.CreateSession(ctx, tok.ID, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		s2, _, _ := a.CreateSession(ctx, tok.ID, time.Hour)
		if err := a.DeleteSession(ctx, s1); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Session(ctx, s1, time.Hour, time.Minute); err == nil {
			t.Fatal("a deleted session is still live")
		}
		if _, err := a.Session(ctx, s2, time.Hour, time.Minute); err != nil {
			t.Fatalf("the other session ended too: %v", err)
		}
		mu.Lock()
		now = now.Add(time.Hour + time.Second)
		mu.Unlock()
		if _, err := a.Session(ctx, s2, time.Hour, time.Minute); err == nil {
			t.Fatal("an expired session is live")
		}
		for _, bad := range []string{
			`INSERT INTO console_sessions (id, token_id, created_at, expires_at) VALUES ('short', ?, 1, 2)`,
			`INSERT INTO console_sessions (id, token_id, created_at, expires_at) VALUES ('` + hex.EncodeToString(make([]byte, 32)) + `', ?, 5, 5)`,
		} {
			if err := db.Exec(bad, tok.ID).Error; err == nil {
				t.Fatalf("accepted: %s", bad)
			}
		}

		var wg sync.WaitGroup
		var made sync.Map
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < 5; j++ {
					if id, _, err := a.CreateSession(ctx, tok.ID, time.Hour); err == nil {
						made.Store(id, true)
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(5 * time.Millisecond)
			if _, err := a.DeleteToken(ctx, tok.ID, ""); err != nil {
				t.Errorf("DeleteToken: %v", err)
			}
		}()
		wg.Wait()
		var n int64
		if err := db.Raw(`SELECT COUNT(*) FROM console_sessions WHERE token_id = ?`, tok.ID).Scan(&n).Error; err != nil || n != 0 {
			t.Fatalf("%d sessions outlived their token (%v)", n, err)
		}
		made.Range(func(k, _ any) bool {
			if _, err := a.Session(ctx, k.(string), time.Hour, time.Minute); err == nil {
				t.Errorf("session %v is live after its token was deleted", k)
			}
			return true
		})
	})
}

// BenchmarkConsoleSession is the per-request cost of a console session
// look-up (one indexed join; renewal writes at most once per renewEvery).
func BenchmarkConsoleSession(b *testing.B) {
	for _, d := range dbtest.Dialects {
		b.Run(string(d), func(b *testing.B) {
			a := New(dbtest.Open(b, d), Options{})
			ctx := context.Background()
			if _, err := a.CreateToken(ctx, "bench", RoleViewer, "bench-token-0123456789"); err != nil {
				b.Fatal(err)
			}
			tok, _ := a.Authenticate(ctx, "bench-token-0123456789")
			id, _, err := a.CreateSession(ctx, tok.ID, 12*time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := a.Session(ctx, id, 12*time.Hour, 5*time.Minute); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
