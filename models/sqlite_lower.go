package models

import (
	"database/sql/driver"
	"strings"

	gosqlite "github.com/glebarez/go-sqlite"
)

// sqliteLower is the SQL function SQLite's half of Contains folds case
// with: SQLite's own lower() changes only ASCII letters, so a search for
// "ü" would never find "Ünit". It lower-cases as Go does, which is how
// callers fold the text they search for. Registered on the driver, it
// exists on every SQLite connection this process opens; nothing in the
// schema uses it, so other tools can still open the file.
const sqliteLower = "ipledger_lower"

func init() {
	if err := gosqlite.RegisterDeterministicScalarFunction(sqliteLower, 1, func(_ *gosqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		switch v := args[0].(type) {
		case string:
			return strings.ToLower(v), nil
		case []byte:
			return strings.ToLower(string(v)), nil
		default: // NULL, numbers: as SQLite's lower() would see them
			return v, nil
		}
	}); err != nil {
		panic(err)
	}
}
