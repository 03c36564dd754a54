package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

// TestTokenListDelete: `token list` shows every token with its live
// console sessions and never a token value; `token delete --name|--id`
// deletes it and its sessions at once; unknown names/ids and ambiguous
// flags are refused and change nothing. SQLite file and PostgreSQL.
func TestTokenListDelete(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			var dbURL string
			if dialect == "sqlite" {
				dbURL = dbtest.NewSQLiteURL(t)
				db, _, err := database.Open(dbURL)
				if err != nil {
					t.Fatal(err)
				}
				if err := models.Migrate(db); err != nil {
					t.Fatal(err)
				}
			} else {
				dbURL = dbtest.NewPostgresURL(t)
			}
			db, closeDB, err := openDatabase(config{DatabaseURL: dbURL})
			if err != nil {
				t.Fatal(err)
			}
			defer closeDB()
			au := auth.New(db, auth.Options{})
			ctx := context.Background()
			alice, _ := au.CreateToken(ctx, "alice", auth.RoleOperator, "")
			if _, err := au.CreateToken(ctx, "bob", auth.RoleViewer, ""); err != nil {
				t.Fatal(err)
			}
			tok, err := au.Authenticate(ctx, alice)
			if err != nil {
				t.Fatal(err)
			}
			sid, _, err := au.CreateSession(ctx, tok.ID, 3600e9)
			if err != nil {
				t.Fatal(err)
			}

			out, err := runCmd(t, "token", "list", "--database", dbURL)
			if err != nil {
				t.Fatalf("list: %v\n%s", err, out)
			}
			if !strings.Contains(out, "alice") || !strings.Contains(out, "operator") || !strings.Contains(out, "bob") || strings.Contains(out, alice) {
				t.Fatalf("token list:\n%s", out)
			}
			out, err = runCmd(t, "token", "list", "--database", dbURL, "-o", "json")
			var js struct {
				Items []auth.TokenInfo `json:"items"`
			}
			if err != nil || json.Unmarshal([]byte(out), &js) != nil || len(js.Items) != 2 || js.Items[0].Name != "alice" || js.Items[0].Sessions != 1 {
				t.Fatalf("token list -o json: %v\n%s", err, out)
			}

			for _, bad := range [][]string{{}, {"--name", "alice", "--id", "1"}, {"--name", "nobody"}, {"--id", "999999"}} {
				if out, err := runCmd(t, append([]string{"token", "delete", "--database", dbURL}, bad...)...); err == nil {
					t.Fatalf("token delete %v accepted:\n%s", bad, out)
				}
			}
			out, err = runCmd(t, "token", "delete", "--database", dbURL, "--name", "alice")
			if err != nil || !strings.Contains(out, "deleted token alice") {
				t.Fatalf("delete --name alice: %v\n%s", err, out)
			}
			if _, err := au.Authenticate(ctx, alice); err == nil {
				t.Fatal("the deleted token still authenticates")
			}
			if _, err := au.Session(ctx, sid, 3600e9, 60e9); err == nil {
				t.Fatal("the deleted token's console session lives on")
			}
			out, err = runCmd(t, "token", "delete", "--database", dbURL, "--id", strconv.FormatInt(js.Items[1].ID, 10))
			if err != nil || !strings.Contains(out, "deleted token bob") {
				t.Fatalf("delete --id: %v\n%s", err, out)
			}
			toks, _ := au.ListTokens(ctx)
			if len(toks) != 0 {
				t.Fatalf("tokens left: %v", toks)
			}
		})
	}
	if out, err := runCmd(t, "token", "list", "--database", "sqlite:"+filepath.Join(t.TempDir(), "typo.db")); err == nil {
		t.Fatalf("token list on a missing SQLite file succeeded:\n%s", out)
	}
}
