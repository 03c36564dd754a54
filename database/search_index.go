package database

import (
	"fmt"

	"github.com/ipledger/ipledger/models"
	"gorm.io/gorm"
)

// SearchIndexStatus says how db answers the console's search for part of
// a text: "" when every SearchIndex is in place (PostgreSQL with pg_trgm),
// else one sentence saying that the search scans the fleet and why, for
// the start-up log, `ipledger migrate` and `ipledger check`.
func SearchIndexStatus(db *gorm.DB) (string, error) {
	if models.DialectOf(db) != models.Postgres {
		return "", nil
	}
	n, err := models.PresentSearchIndexes(db)
	if err != nil || n == len(models.SearchIndexes) {
		return "", err
	}
	ns, err := models.TrigramSchema(db)
	if err != nil {
		return "", err
	}
	if ns == "" {
		return "search for part of a text scans every machine and ExpectedMachine: the PostgreSQL extension pg_trgm " +
			"is not installed and this database user may not create it (run CREATE EXTENSION pg_trgm as the database's " +
			"owner, then restart ipledger or run ipledger migrate)", nil
	}
	if usable, err := models.TrigramUsable(db, ns); err != nil || !usable {
		return fmt.Sprintf("search for part of a text scans every machine and ExpectedMachine: the PostgreSQL extension pg_trgm "+
			"is installed in the schema %s, which this database user may not use (GRANT USAGE ON SCHEMA %s to it, then "+
			"restart ipledger or run ipledger migrate)", ns, ns), err
	}
	return fmt.Sprintf("search for part of a text scans every machine and ExpectedMachine: %d of its %d trigram indexes "+
		"are missing (restart ipledger or run ipledger migrate to create them)", len(models.SearchIndexes)-n, len(models.SearchIndexes)), nil
}
