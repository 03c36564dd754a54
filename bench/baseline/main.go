// Command baseline is the comparison server of scripts/bench-ratios.sh: a
// minimal Go net/http server on the same PostgreSQL as ipledger, answering
// the same POST /api/v1/pools/{pool}/allocations that bench/loadgen sends,
// so that every ipledger figure can be read as a ratio to it, measured in
// the same run. Modes (-mode):
//
//	ceiling  the REST ceiling: check the bearer token, decode the JSON
//	         body, one single-row INSERT (unique key) per request, 201 JSON.
//	         No pool, no lowest-free search: the least a REST service on
//	         this database can do per request.
//	netbox   the allocator most sites start with (NetBox's "first
//	         available IP"): one global lock, then a scan of every value
//	         the pool holds for the lowest free one.
//	nico     a row per value (-values rows per pool, created at start),
//	         each allocation taking a random free row with
//	         SELECT … FOR UPDATE SKIP LOCKED.
//
// netbox and nico are idempotent per owner (an owner asking again gets
// 200 and its value) like ipledger; ceiling answers 409 for a repeated
// owner. Only for benchmarks on 127.0.0.1: it serves until SIGTERM.
package main

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

type server struct {
	db     *pgxpool.Pool
	token  []byte
	mode   string
	values int64
}

type allocBody struct {
	OwnerType string `json:"owner_type"`
	OwnerID   string `json:"owner_id"`
	Value     string `json:"value,omitempty"`
}

func main() {
	listen := flag.String("listen", "127.0.0.1:18090", "listen address (loopback)")
	dbURL := flag.String("database", "", "PostgreSQL URL")
	mode := flag.String("mode", "ceiling", "ceiling, netbox or nico")
	pools := flag.String("pools", "bench", "nico mode: comma-separated pools to create rows for")
	values := flag.Int64("values", 250000, "nico mode: rows (values) per pool")
	conns := flag.Int("conns", 32, "database connections")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg, err := pgxpool.ParseConfig(*dbURL)
	if err != nil {
		log.Fatal(err)
	}
	cfg.MaxConns = int32(*conns)
	db, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	s := &server{db: db, token: []byte(os.Getenv("IPLEDGER_TOKEN")), mode: *mode, values: *values}
	if err := s.setup(ctx, splitList(*pools)); err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/pools/{pool}/allocations", s.allocate)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"status":"ready"}`)) })
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

func splitList(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

func (s *server) setup(ctx context.Context, pools []string) error {
	var stmts []string
	switch s.mode {
	case "ceiling":
		stmts = []string{`CREATE TABLE IF NOT EXISTS baseline_ceiling (id bigserial PRIMARY KEY, pool text NOT NULL,
 owner_type text NOT NULL, owner_id text NOT NULL, at timestamptz NOT NULL DEFAULT now(), UNIQUE (pool, owner_type, owner_id))`}
	case "netbox":
		stmts = []string{`CREATE TABLE IF NOT EXISTS baseline_netbox (pool text NOT NULL, value bigint NOT NULL,
 owner_type text NOT NULL, owner_id text NOT NULL, PRIMARY KEY (pool, value), UNIQUE (pool, owner_type, owner_id))`}
	case "nico":
		stmts = []string{`CREATE TABLE IF NOT EXISTS baseline_nico (id bigserial PRIMARY KEY, pool text NOT NULL, value bigint NOT NULL,
 owner_type text, owner_id text, UNIQUE (pool, value), UNIQUE (pool, owner_type, owner_id))`,
			`CREATE INDEX IF NOT EXISTS baseline_nico_free ON baseline_nico (pool, id) WHERE owner_id IS NULL`}
	default:
		return fmt.Errorf("unknown -mode %q: want ceiling, netbox or nico", s.mode)
	}
	for _, q := range stmts {
		if _, err := s.db.Exec(ctx, q); err != nil {
			return err
		}
	}
	if s.mode == "nico" {
		for _, p := range pools {
			var n int64
			if err := s.db.QueryRow(ctx, `SELECT count(*) FROM baseline_nico WHERE pool = $1`, p).Scan(&n); err != nil {
				return err
			}
			if n == 0 {
				if _, err := s.db.Exec(ctx, `INSERT INTO baseline_nico (pool, value) SELECT $1, g FROM generate_series(0, $2 - 1) g`, p, s.values); err != nil {
					return err
				}
			}
		}
		if _, err := s.db.Exec(ctx, `ANALYZE baseline_nico`); err != nil {
			return err
		}
	}
	return nil
}

func (s *server) fail(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func (s *server) allocate(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization")
	if len(auth) < 7 || subtle.ConstantTimeCompare([]byte(auth[7:]), s.token) != 1 || auth[:7] != "Bearer " {
		s.fail(w, http.StatusUnauthorized, "unauthorized", "missing or invalid token")
		return
	}
	var b allocBody
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil || b.OwnerType == "" || b.OwnerID == "" {
		s.fail(w, http.StatusBadRequest, "bad_request", "body must be {owner_type, owner_id}")
		return
	}
	pool := r.PathValue("pool")
	var (
		value   int64
		created bool
		err     error
	)
	switch s.mode {
	case "ceiling":
		err = s.db.QueryRow(r.Context(), `INSERT INTO baseline_ceiling (pool, owner_type, owner_id) VALUES ($1, $2, $3) RETURNING id`,
			pool, b.OwnerType, b.OwnerID).Scan(&value)
		created = true
	case "netbox":
		value, created, err = s.netbox(r.Context(), pool, b)
	case "nico":
		value, created, err = s.nico(r.Context(), pool, b)
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) && pg.Code == "23505" {
		s.fail(w, http.StatusConflict, "conflict", pg.Message)
		return
	}
	if err != nil {
		s.fail(w, http.StatusServiceUnavailable, "unavailable", err.Error())
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"pool": pool, "value": strconv.FormatInt(value, 10),
		"owner_type": b.OwnerType, "owner_id": b.OwnerID, "state": "allocated"})
}

// netbox: one lock for every pool, then every held value of the pool read
// in order and the first gap taken (as NetBox computes a prefix's first
// available address from the set of its child addresses).
func (s *server) netbox(ctx context.Context, pool string, b allocBody) (v int64, created bool, err error) {
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(4242)`); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `SELECT value FROM baseline_netbox WHERE pool = $1 AND owner_type = $2 AND owner_id = $3`, pool, b.OwnerType, b.OwnerID).Scan(&v)
		if err == nil {
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT value FROM baseline_netbox WHERE pool = $1 ORDER BY value`, pool)
		if err != nil {
			return err
		}
		held, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		v = 0
		for _, h := range held {
			if h != v {
				break
			}
			v++
		}
		created = true
		_, err = tx.Exec(ctx, `INSERT INTO baseline_netbox (pool, value, owner_type, owner_id) VALUES ($1, $2, $3, $4)`, pool, v, b.OwnerType, b.OwnerID)
		return err
	})
	return v, created, err
}

// nico: a random free row of the pool, skipping rows other transactions
// hold, taken for the owner.
func (s *server) nico(ctx context.Context, pool string, b allocBody) (v int64, created bool, err error) {
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `SELECT value FROM baseline_nico WHERE pool = $1 AND owner_type = $2 AND owner_id = $3`, pool, b.OwnerType, b.OwnerID).Scan(&v)
		if err == nil {
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		var id int64
		for _, from := range []int64{1 + rand.Int64N(s.values), 0} {
			err = tx.QueryRow(ctx, `SELECT id, value FROM baseline_nico WHERE pool = $1 AND owner_id IS NULL AND id >= $2
 ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED`, pool, from).Scan(&id, &v)
			if !errors.Is(err, pgx.ErrNoRows) {
				break
			}
		}
		if err != nil {
			return err
		}
		created = true
		_, err = tx.Exec(ctx, `UPDATE baseline_nico SET owner_type = $2, owner_id = $3 WHERE id = $1`, id, b.OwnerType, b.OwnerID)
		return err
	})
	return v, created, err
}
