package dbcheck

import (
	"github.com/ipledger/ipledger/models"
)

// checkConstraints compares the database's catalog with what the
// migrations create (models.SchemaObjects): the other rules recount the
// rows, this one says whether the database will go on refusing what
// breaks them. A database at another schema version is left to
// schema_version, whose finding says what to do first.
func checkConstraints(c *checker) error {
	if c.res.Failed("schema_version") {
		return nil
	}
	present, err := models.SchemaCatalog(c.q)
	if err != nil {
		return err
	}
	for _, o := range models.MissingSchemaObjects(c.dialect, present) {
		c.add("constraints", "%s %s on %s is missing (restore the schema with the data, into an empty database)", o.Kind, o.Name, o.Table)
	}
	return nil
}
