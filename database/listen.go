package database

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"
)

// DialLike opens a new pgx connection, outside db's pool, with the
// configuration of the pool's connections (host, user, database,
// search_path, …): the connection a LISTEN keeps open (PostgreSQL only).
func DialLike(ctx context.Context, db *gorm.DB) (*pgx.Conn, error) {
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	c, err := sqlDB.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var cfg *pgx.ConnConfig
	err = c.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return errors.New("listener: the PostgreSQL driver is not pgx")
		}
		cfg = sc.Conn().Config().Copy()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cfg)
}
