package models_test

import (
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

// SchemaObjects is exactly the catalog of a freshly migrated database:
// nothing the migrations create is left out of what `ipledger check`
// requires, and nothing is required that they do not create.
func TestSchemaObjectsAreTheCatalog(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		t.Parallel()
		d := models.DialectOf(db)
		got, err := models.SchemaCatalog(db)
		if err != nil {
			t.Fatal(err)
		}
		want := models.SchemaObjects(d)
		if len(want) < 100 {
			t.Fatalf("SchemaObjects(%s) lists %d objects", d, len(want))
		}
		for _, o := range models.MissingSchemaObjects(d, got) {
			t.Errorf("listed but not created by the migrations: %s", o)
		}
		listed := map[models.SchemaObject]bool{}
		for _, o := range want {
			listed[o] = true
		}
		for _, o := range got {
			if !listed[o] && !models.IsSearchIndex(o) {
				t.Errorf("created by the migrations but not listed: %s", o)
			}
		}
		// The test database has pg_trgm (dbtest), so PostgreSQL has every
		// search index and SQLite none.
		indexed := 0
		for _, o := range got {
			if models.IsSearchIndex(o) {
				indexed++
			}
		}
		if wantIndexed := map[models.Dialect]int{models.Postgres: len(models.SearchIndexes)}[d]; indexed != wantIndexed {
			t.Errorf("%d search indexes, want %d", indexed, wantIndexed)
		}
		if t.Failed() {
			t.Logf("the %s catalog, as models/schema_objects.go lists it:\n%s", d, models.FormatSchemaObjects(got))
		}
	})
}
