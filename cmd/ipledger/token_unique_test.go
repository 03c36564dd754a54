package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

// Token names are unique: a second `token create` with a name in use
// exits non-zero naming it, and nothing is created. Tokens that shared a
// name before the rule are kept, and `migrate` reports them, and
// overlapping address pools too.
func TestTokenNamesUnique(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			var dbURL string
			if dialect == "sqlite" {
				dbURL = dbtest.NewSQLiteURL(t)
			} else {
				dbURL = dbtest.NewPostgresURL(t)
			}
			db, _, err := database.Open(dbURL)
			if err != nil {
				t.Fatal(err)
			}
			if s, e := db.DB(); e == nil {
				defer s.Close()
			}
			// An older database where two tokens are named ci.
			if err := models.MigrateTo(db, 11); err != nil {
				t.Fatal(err)
			}
			for _, h := range []string{"h1", "h2"} {
				if err := db.Create(&models.APIToken{Name: "ci", Role: "viewer", TokenHash: h}).Error; err != nil {
					t.Fatal(err)
				}
			}
			// And two address pools that overlap.
			for i, name := range []string{"a", "b"} {
				p := models.Pool{Name: name, Type: "ipv4", Version: 1}
				if err := db.Create(&p).Error; err != nil {
					t.Fatal(err)
				}
				first := fmt.Sprintf("%032x", 100+50*i)
				last := fmt.Sprintf("%032x", 200+50*i)
				if err := db.Create(&models.PoolRange{PoolID: p.ID, FirstKey: first, LastKey: last, FirstValue: "0.0.0." + fmt.Sprint(100+50*i), LastValue: "0.0.0." + fmt.Sprint(200+50*i), Version: 1}).Error; err != nil {
					t.Fatal(err)
				}
			}
			out, err := runCmd(t, "migrate", "--database", dbURL)
			if err != nil || !strings.Contains(out, `several tokens are named "ci"`) ||
				!strings.Contains(out, `address pools overlap: range 0.0.0.100..0.0.0.200 of pool "a" overlaps range 0.0.0.150..0.0.0.250 of pool "b"`) {
				t.Fatalf("migrate: %v\n%s", err, out)
			}
			if out, err := runCmd(t, "token", "create", "--database", dbURL, "--name", "ops", "--role", "viewer"); err != nil {
				t.Fatalf("create: %v\n%s", err, out)
			}
			for _, name := range []string{"ops", "ci"} {
				out, err := runCmd(t, "token", "create", "--database", dbURL, "--name", name, "--role", "admin")
				if err == nil || !strings.Contains(err.Error(), `a token named "`+name+`" already exists`) {
					t.Fatalf("second %s: %v\n%s", name, err, out)
				}
			}
			a := allocator.New(db, allocator.Options{})
			au := auth.New(a.DB(), auth.Options{})
			toks, err := au.ListTokens(context.Background())
			if err != nil || len(toks) != 3 {
				t.Fatalf("tokens %v %v", toks, err)
			}
		})
	}
}
