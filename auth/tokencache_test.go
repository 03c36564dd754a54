package auth

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/internal/testkit"
	"github.com/ipledger/ipledger/models"
)

// On PostgreSQL, while ListenForTokenChanges runs, Authenticate answers a
// known token from memory; a token deleted behind the server's back (as
// with psql or `ipledger token delete` from another process) stops
// working as soon as the notification arrives; a role changed the same
// way takes effect; the server's own DeleteToken takes effect at once.
// When the listening connection is cut, the cache is off (every call
// reads the database, so a change made meanwhile is seen at once) until
// the listener is back. On SQLite nothing is cached.
func TestTokenCacheFollowsChanges(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		a := New(db, Options{})
		tokA, err := a.CreateToken(ctx, "a", RoleAdmin, "")
		if err != nil {
			t.Fatal(err)
		}
		tokB, err := a.CreateToken(ctx, "b", RoleOperator, "")
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-a.ListenForTokenChanges(ctx):
		case <-time.After(5 * time.Second):
			t.Fatal("the token listener did not start")
		}
		auth := func(tok string) (*Token, error) { return a.Authenticate(ctx, tok) }
		if _, err := auth(tokA); err != nil {
			t.Fatal(err)
		}
		reads := a.tokenReads.Load()
		if _, err := auth(tokA); err != nil {
			t.Fatal(err)
		}
		pg := models.DialectOf(db) == models.Postgres
		if cached := a.tokenReads.Load() == reads; cached != pg {
			t.Fatalf("second look-up served from memory: %t (want %t on %s)", cached, pg, models.DialectOf(db))
		}
		if !pg {
			return
		}

		// Changed behind the server's back: a role, then a deletion.
		if _, err := auth(tokB); err != nil {
			t.Fatal(err)
		}
		if err := db.Exec(`UPDATE api_tokens SET role = 'viewer' WHERE name = 'b'`).Error; err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 5*time.Second, func() bool {
			tk, err := auth(tokB)
			return err == nil && tk.Role == RoleViewer
		}, "the role change to reach the cache")
		if err := db.Exec(`DELETE FROM api_tokens WHERE name = 'b'`).Error; err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 5*time.Second, func() bool {
			_, err := auth(tokB)
			e, ok := fault.AsError(err)
			return ok && e.Code == fault.CodeUnauthorized
		}, "the deletion to reach the cache")

		// The server's own deletion takes effect before its next request.
		tokC, _ := a.CreateToken(ctx, "c", RoleAdmin, "")
		if _, err := auth(tokC); err != nil {
			t.Fatal(err)
		}
		if _, err := a.DeleteToken(ctx, 0, "c"); err != nil {
			t.Fatal(err)
		}
		_, err = auth(tokC)
		testkit.WantCode(t, err, fault.CodeUnauthorized, "")

		// Cut the listening connection: the cache turns off, so a deletion
		// made while no notification can arrive is seen at once.
		a.tokens.mu.Lock()
		pid := a.tokens.pid
		a.tokens.mu.Unlock()
		var killed bool
		if err := db.Raw(`SELECT pg_terminate_backend(?)`, pid).Scan(&killed).Error; err != nil || !killed {
			t.Fatalf("terminate the listener's backend %d: %t %v", pid, killed, err)
		}
		testkit.WaitFor(t, 5*time.Second, func() bool { return !a.tokens.isLive() }, "the cache to turn off")
		if err := db.Exec(`DELETE FROM api_tokens WHERE name = 'a'`).Error; err != nil {
			t.Fatal(err)
		}
		_, err = auth(tokA)
		testkit.WantCode(t, err, fault.CodeUnauthorized, "")

		// The listener comes back and caching resumes.
		testkit.WaitFor(t, 5*time.Second, a.tokens.isLive, "the listener to reconnect")
		// (The creation's own notification may empty the cache once more.)
		tokD, _ := a.CreateToken(ctx, "d", RoleViewer, "")
		testkit.WaitFor(t, 5*time.Second, func() bool {
			if _, err := auth(tokD); err != nil {
				t.Fatal(err)
			}
			reads := a.tokenReads.Load()
			_, err := auth(tokD)
			return err == nil && a.tokenReads.Load() == reads
		}, "the cache to answer again after reconnecting")

		// Stopping the listener turns the cache off for good.
		cancel()
		testkit.WaitFor(t, 5*time.Second, func() bool { return !a.tokens.isLive() }, "the cache to turn off after the listener stops")
	})
}
