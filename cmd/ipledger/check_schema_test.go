package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

// `ipledger check` on a database of an older schema reports the
// schema_version finding alone and exits non-zero, its JSON intact,
// instead of failing on the tables and columns the older schema lacks.
func TestCheckOlderSchemaReportsVersionOnly(t *testing.T) {
	t.Parallel()
	for _, d := range []models.Dialect{models.SQLite, models.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			u := dbtest.NewURL(t, d)
			db, _, err := database.Open(u)
			if err != nil {
				t.Fatal(err)
			}
			if err := models.MigrateTo(db, 3); err != nil {
				t.Fatal(err)
			}
			if s, e := db.DB(); e == nil {
				s.Close()
			}
			out, err := runCmd(t, "check", "--database", u)
			if err == nil || !strings.Contains(out, "FAIL schema_version") || !strings.Contains(out, "ipledger migrate") ||
				!strings.Contains(out, "rules were not run") || strings.Contains(out, "range_counts") {
				t.Fatalf("check on an old schema: %v\n%s", err, out)
			}
			out, err = runCmd(t, "check", "--database", u, "-o", "json")
			var res struct {
				Findings []struct{ Rule, Message string }
				NotRun   string `json:"not_run"`
			}
			if err == nil || json.NewDecoder(strings.NewReader(out)).Decode(&res) != nil || len(res.Findings) != 1 ||
				res.Findings[0].Rule != "schema_version" || res.NotRun == "" {
				t.Fatalf("check -o json on an old schema: %v\n%s", err, out)
			}
		})
	}
}
