// Command upgradefixture makes one fixture of the upgrade test
// (internal/upgrade, docs/operations.md "Upgrades"): it builds ipledger at
// an older commit, serves it on a fresh SQLite file and on a fresh schema
// of the machine's PostgreSQL, fills both only through that build's REST
// API and CLI, records what the API answers for every list, and stores
// the database (the SQLite file and a plain pg_dump of the schema,
// gzipped) with the answers under internal/upgrade/testdata/<commit>/.
// It then asks the old build a few more writes on the stored state and
// records their answers too: today's code must give the same ones.
//
//	go run ./scripts/upgradefixture e537993
//	go run ./scripts/upgradefixture -dialects sqlite HEAD
//
// CI never runs it; it runs the test on the committed fixtures.
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"flag"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ipledger/ipledger/internal/upgrade"
)

func main() {
	// The provider of single sign-on logs every request through slog;
	// this program's own lines go to stderr.
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	log.SetOutput(os.Stderr)
	log.SetFlags(log.Ltime)
	out := flag.String("out", "", "directory of the fixture (default internal/upgrade/testdata/<short commit>)")
	pg := flag.String("postgres", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL database the fixture's schema is made in")
	dialects := flag.String("dialects", "sqlite,postgres", "databases to make the fixture on")
	keep := flag.Bool("keep", false, "keep the temporary directory (build, logs, databases)")
	side := flag.Bool("side-by-side", false, "store nothing: fill with the old build, migrate with the working tree's build under the running old server, let the old server write, and print today's check (docs/operations.md, rolling upgrades)")
	todayBin := flag.String("today", "", "with -side-by-side: an ipledger binary of the working tree (default: build it)")
	prebuilt := flag.String("bin", "", "an ipledger binary already built at REV (default: build it)")
	flag.Parse()
	if flag.NArg() != 1 {
		die("usage: upgradefixture [flags] REV")
	}
	root := strings.TrimSpace(run("", "git", "rev-parse", "--show-toplevel"))
	short := strings.TrimSpace(run(root, "git", "rev-parse", "--short=7", flag.Arg(0)+"^{commit}"))
	if *out == "" {
		*out = filepath.Join(root, "internal", "upgrade", "testdata", short)
	}
	tmp, err := os.MkdirTemp("", "ipledger-upgrade-fixture-")
	if err != nil {
		die("%v", err)
	}
	if !*keep {
		atExit = append(atExit, func() { _ = os.RemoveAll(tmp) })
		defer runAtExit()
	}
	bin := *prebuilt
	if bin == "" {
		bin = build(root, short, tmp)
	}
	schema := schemaVersion(root, short)
	log.Printf("%s: schema version %d, binary %s", short, schema, bin)
	today := *todayBin
	if *side && today == "" {
		today = buildToday(root, tmp)
	}
	if *side {
		// nothing is stored
	} else if err := os.MkdirAll(*out, 0o755); err != nil {
		die("%v", err)
	}
	for _, d := range strings.Split(*dialects, ",") {
		f := upgrade.Fixture{Rev: short, Schema: schema, Dialect: d}
		var dbURL string
		switch d {
		case "sqlite":
			dbURL = "sqlite:" + filepath.Join(tmp, "sqlite", "ipledger.db")
		case "postgres":
			f.PGSchema = "upgrade_fixture_" + short
			// pg_trgm where the tests have it (database/dbtest), so that the
			// dump's trigram indexes name public's operator class: a build
			// creating the extension itself would put it in the fixture's
			// schema, which the test's own schema then lacks. A server
			// without the extension makes a fixture without those indexes.
			psql(*pg, `DO $$ BEGIN CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public; EXCEPTION WHEN OTHERS THEN NULL; END $$`)
			psql(*pg, "DROP SCHEMA IF EXISTS "+f.PGSchema+" CASCADE; CREATE SCHEMA "+f.PGSchema)
			u, err := url.Parse(*pg)
			if err != nil {
				die("%v", err)
			}
			q := u.Query()
			q.Set("search_path", f.PGSchema)
			u.RawQuery = q.Encode()
			dbURL = u.String()
		default:
			die("unknown dialect %q (want sqlite or postgres)", d)
		}
		make1(&f, bin, dbURL, tmp)
		if *side {
			sideBySide(&f, bin, today, dbURL, tmp)
			if d == "postgres" {
				psql(*pg, "DROP SCHEMA "+f.PGSchema+" CASCADE")
			}
			continue
		}
		switch d {
		case "sqlite":
			storeSQLite(filepath.Join(tmp, "sqlite", "ipledger.db"), filepath.Join(*out, "sqlite.db.gz"))
		case "postgres":
			storePostgres(*pg, f.PGSchema, filepath.Join(*out, "postgres.sql.gz"))
		}
		next(&f, bin, dbURL, tmp)
		if d == "postgres" {
			psql(*pg, "DROP SCHEMA "+f.PGSchema+" CASCADE")
		}
		b, err := json.MarshalIndent(f, "", " ")
		if err != nil {
			die("%v", err)
		}
		name := filepath.Join(*out, "answers-"+d+".json")
		if err := os.WriteFile(name, append(b, '\n'), 0o644); err != nil {
			die("%v", err)
		}
		log.Printf("%s: wrote %s", d, name)
	}
}

// make1 fills a fresh database through the old build and records its
// answers into f. The server is stopped when it returns, so the database
// can be stored.
func make1(f *upgrade.Fixture, bin, dbURL, tmp string) {
	migrate := exec.Command(bin, "migrate")
	migrate.Env = append(os.Environ(), "IPLEDGER_DATABASE_URL="+dbURL)
	migrate.Stderr = os.Stderr
	if err := migrate.Run(); err != nil {
		die("migrate: %v", err)
	}
	for _, t := range []upgrade.Token{{Name: "fixture-admin", Role: "admin"}, {Name: "fixture-ops", Role: "operator"}, {Name: "fixture-audit", Role: "viewer"}} {
		cmd := exec.Command(bin, "token", "create", "--name", t.Name, "--role", t.Role)
		cmd.Env = append(os.Environ(), "IPLEDGER_DATABASE_URL="+dbURL)
		cmd.Stderr = os.Stderr
		b, err := cmd.Output()
		if err != nil {
			die("token create %s: %v", t.Name, err)
		}
		t.Value = strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
		f.Tokens = append(f.Tokens, t)
	}
	hooks := startReceiver()
	defer hooks.Close()
	addr := freeAddr()
	p := startIdP(addr)
	defer p.Close()
	srv := serve(bin, dbURL, f.Tokens[0].Value, filepath.Join(tmp, f.Dialect+"-fill.log"), addr, p.env(addr)...)
	s := &site{admin: srv.client(f.Tokens[0].Value), ops: srv.client(f.Tokens[1].Value), hooks: "http://" + hooks.Addr}
	s.fill()
	f.Sessions = s.sessions(p, f.Tokens[2])
	f.Lists = settled(s.admin)
	srv.stop()
	log.Printf("%s: filled; %d lists recorded", f.Dialect, len(f.Lists))
}

// settled records every list until two records half a second apart are
// the same: the build's background work (the feed's sequencer numbering
// the last events, webhook deliveries) is done, and the stored database
// is what the answers say.
func settled(c upgrade.Client) map[string]json.RawMessage {
	var last []byte
	for range 60 {
		lists, err := upgrade.Record(c)
		if err != nil {
			die("record: %v", err)
		}
		b, err := json.Marshal(lists)
		if err != nil {
			die("%v", err)
		}
		if bytes.Equal(b, last) {
			return lists
		}
		last = b
		time.Sleep(500 * time.Millisecond)
	}
	die("the answers did not settle within 30 s")
	return nil
}

// next restarts the old build on the stored database and records its
// answers to the writes the test repeats with today's code.
func next(f *upgrade.Fixture, bin, dbURL, tmp string) {
	srv := serve(bin, dbURL, f.Tokens[0].Value, filepath.Join(tmp, f.Dialect+"-next.log"), freeAddr())
	defer srv.stop()
	s := &site{admin: srv.client(f.Tokens[0].Value), ops: srv.client(f.Tokens[1].Value)}
	f.Next = s.nextWrites()
}

type server struct {
	cmd  *exec.Cmd
	base string
	log  *os.File
}

// freeAddr is a loopback address with a port nothing listens on.
func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		die("%v", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		die("%v", err)
	}
	return addr
}

// serve starts the old build on addr and waits until it answers.
func serve(bin, dbURL, admin, logFile, addr string, env ...string) *server {
	lf, err := os.Create(logFile)
	if err != nil {
		die("%v", err)
	}
	cmd := exec.Command(bin, "serve", "--listen", addr)
	cmd.Env = append(append(os.Environ(), "IPLEDGER_DATABASE_URL="+dbURL, "IPLEDGER_ADMIN_TOKEN="+admin), env...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		die("%v", err)
	}
	s := &server{cmd: cmd, base: "http://" + addr, log: lf}
	atExit = append(atExit, func() {
		if s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Kill()
		}
	})
	for range 200 {
		if res, err := http.Get(s.base + "/healthz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return s
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	die("server not ready after 10 s; see %s", logFile)
	return nil
}

func (s *server) client(token string) upgrade.Client {
	return upgrade.Client{Base: s.base, Token: token, HTTP: &http.Client{Timeout: 30 * time.Second}}
}

func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			log.Printf("server stopped: %v; see %s", err, s.log.Name())
		}
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		die("server did not stop within 30 s of SIGTERM")
	}
	_ = s.log.Close()
}

// atExit are what die undoes before the program ends: servers started,
// the temporary directory.
var atExit []func()

func runAtExit() {
	for i := len(atExit) - 1; i >= 0; i-- {
		atExit[i]()
	}
	atExit = nil
}

// die ends the program with a message, stopping what it started.
func die(format string, args ...any) {
	runAtExit()
	log.Fatalf(format, args...)
}

// build compiles cmd/ipledger at rev in a temporary worktree.
func build(root, rev, tmp string) string {
	src := filepath.Join(tmp, "src")
	run(root, "git", "worktree", "add", "--quiet", "--detach", src, rev)
	remove := func() { _ = exec.Command("git", "-C", root, "worktree", "remove", "--force", src).Run() }
	atExit = append(atExit, remove)
	defer remove()
	bin := filepath.Join(tmp, "ipledger-"+rev)
	log.Printf("building %s", rev)
	run(src, "nice", "go", "build", "-o", bin, "./cmd/ipledger")
	return bin
}

// schemaVersion is the highest migration version models/ holds at rev.
func schemaVersion(root, rev string) int {
	out := run(root, "git", "grep", "-h", "-o", "-E", `Version: [0-9]+`, rev, "--", "models/")
	top := 0
	for _, m := range regexp.MustCompile(`[0-9]+`).FindAllString(out, -1) {
		if v, _ := strconv.Atoi(m); v > top {
			top = v
		}
	}
	return top
}

func storeSQLite(db, dst string) {
	for _, side := range []string{"-wal", "-shm"} {
		if st, err := os.Stat(db + side); err == nil && st.Size() > 0 && side == "-wal" {
			die("%s%s holds %d bytes after the server stopped: the database is not checkpointed", db, side, st.Size())
		}
	}
	in, err := os.Open(db)
	if err != nil {
		die("%v", err)
	}
	defer in.Close()
	writeGzip(dst, in)
}

// storePostgres dumps the schema as plain SQL without owners or grants.
// The \restrict lines of newer pg_dump releases are left out, so that an
// older psql loads the dump too.
func storePostgres(base, schema, dst string) {
	cmd := exec.Command("pg_dump", "--no-owner", "--no-privileges", "--schema", schema, "--dbname", base)
	b, err := cmd.Output()
	if err != nil {
		die("pg_dump: %v", err)
	}
	var keep []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, `\restrict`) || strings.HasPrefix(line, `\unrestrict`) {
			continue
		}
		keep = append(keep, line)
	}
	writeGzip(dst, strings.NewReader(strings.Join(keep, "\n")))
}

func writeGzip(dst string, r io.Reader) {
	f, err := os.Create(dst)
	if err != nil {
		die("%v", err)
	}
	zw, _ := gzip.NewWriterLevel(f, gzip.BestCompression)
	if _, err := io.Copy(zw, r); err != nil {
		die("%v", err)
	}
	if err := zw.Close(); err != nil {
		die("%v", err)
	}
	if err := f.Close(); err != nil {
		die("%v", err)
	}
	st, _ := os.Stat(dst)
	log.Printf("stored %s (%d bytes)", dst, st.Size())
}

func psql(base, sql string) {
	run("", "psql", "-qAtX", "-v", "ON_ERROR_STOP=1", "--dbname", base, "-c", "SET client_min_messages = warning", "-c", sql)
}

func run(dir, name string, args ...string) string {
	cmd := exec.CommandContext(context.Background(), name, args...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		die("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return string(b)
}
