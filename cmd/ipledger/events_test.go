package main

import (
	"regexp"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/internal/testkit/serverkit"
)

// TestEventsShowRole: `ipledger events` shows beside each actor the role
// it acted with, and "-" for a system actor, which has none.
func TestEventsShowRole(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		t.Parallel()
		s := serverkit.Start(t, db, serverkit.Options{})
		if out, err := runCLI(t, s.URL, s.Admin, "", "pool", "create", "vlans", "--type", "integer", "--range", "1-9"); err != nil {
			t.Fatalf("pool create: %v\n%s", err, out)
		}
		out, err := runCLI(t, s.URL, s.Admin, "", "events")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			`(?m)^TIME\s+ACTOR\s+ROLE\s+ACTION\s+OBJECT\s+REQUEST$`,
			`(?m)^\S+\s+token:\S+\s+admin\s+pool\.create\s+pool vlans\s`,
			`(?m)^\S+\s+system\S*\s+-\s+token\.create\s`,
		} {
			if !regexp.MustCompile(want).MatchString(out) {
				t.Errorf("no line matching %s in\n%s", want, out)
			}
		}
	})
}
