package models_test

import (
	"sort"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

// TestContains: the search condition matches a needle anywhere in the
// column in any case, and LIKE's wildcards and escape in the needle are
// plain characters on both databases.
func TestContains(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		d := models.SQLite
		if db.Dialector.Name() == "postgres" {
			d = models.Postgres
		}
		if err := db.Exec(`CREATE TABLE t_contains (v text)`).Error; err != nil {
			t.Fatal(err)
		}
		vals := []string{"Rack0500-U01", "a_b", "axb", "50%", "500", `c\d`, `cd`, "", "Ünit-É 7", "ÀÉÎ"}
		for _, v := range vals {
			if err := db.Exec(`INSERT INTO t_contains (v) VALUES (?)`, v).Error; err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Exec(`INSERT INTO t_contains (v) VALUES (NULL)`).Error; err != nil {
			t.Fatal(err)
		}
		for needle, want := range map[string]string{
			"rack0500": "Rack0500-U01",
			"0500-u":   "Rack0500-U01",
			"_":        "a_b",
			"a_b":      "a_b",
			"%":        "50%",
			"0%":       "50%",
			`\`:        `c\d`,
			`c\d`:      `c\d`,
			"50":       "50% 500 Rack0500-U01",
			"zz":       "",
			"ünit":     "Ünit-É 7",
			"é 7":      "Ünit-É 7",
			"àéî":      "ÀÉÎ",
			"é":        "ÀÉÎ Ünit-É 7",
		} {
			cond, arg := models.Contains(d, "v", needle)
			var got []string
			if err := db.Raw(`SELECT v FROM t_contains WHERE `+cond, arg).Scan(&got).Error; err != nil {
				t.Fatalf("%q: %v", needle, err)
			}
			sort.Strings(got)
			if g := strings.Join(got, " "); g != want {
				t.Errorf("contains %q: got %q, want %q", needle, g, want)
			}
		}
	})
}
