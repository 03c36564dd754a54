package auth

import (
	"context"
	"sync"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/internal/testkit"
)

// Token names are unique, also when two creations race; a changed
// IPLEDGER_ADMIN_TOKEN still becomes an admin token, under a name of its
// own.
func TestTokenNamesUnique(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		a, ctx := New(db, Options{}), audit.WithActor(context.Background(), "test", "req-1")
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				_, errs[i] = a.CreateToken(ctx, "ci", RoleViewer, "")
			}(i)
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
			} else {
				testkit.WantCode(t, err, fault.CodeConflict, "", `a token named "ci" already exists`)
			}
		}
		if ok != 1 {
			t.Fatalf("%d tokens named ci created, want 1: %v", ok, errs)
		}
		for _, v := range []string{"first-admin-value-0001", "second-admin-value-0002"} {
			if created, err := a.EnsureAdminToken(ctx, v); err != nil || !created {
				t.Fatalf("admin token %s: %v %v", v, created, err)
			}
			tok, err := a.Authenticate(ctx, v)
			if err != nil || tok.Role != RoleAdmin {
				t.Fatalf("authenticate %s: %+v %v", v, tok, err)
			}
		}
		toks, _ := a.ListTokens(ctx)
		if len(toks) != 3 || toks[1].Name != "bootstrap-admin" || toks[2].Name == "bootstrap-admin" {
			t.Fatalf("tokens %+v", toks)
		}
	})
}
