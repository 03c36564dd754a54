# shellcheck shell=bash
# Shared helpers of ipledger's benchmark and reliability scripts: a
# throwaway PostgreSQL cluster of their own (never the machine's), the
# ipledger and loadgen binaries, and server processes. Source it; it sets
# `set -euo pipefail` and cleans up every process it started on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PGBIN=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
H7_TMP=${H7_TMP:-$(mktemp -d /tmp/ipledger-bench.XXXXXX)}
PGPORT=${PGPORT:-55432}
# Ports of the (up to two) ipledger servers a script starts.
P1=${P1:-18081}
P2=${P2:-18082}
PGDATA_DIR="$H7_TMP/pg"
BIN="$H7_TMP/bin"
ADMIN_TOKEN=${ADMIN_TOKEN:-ipl_bench_admin_token_0123456789abcdef}
export IPLEDGER_TOKEN=$ADMIN_TOKEN
SERVER_PIDS=()

log() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }

# as_pg runs a command as the postgres OS user when we are root (initdb
# and postgres refuse to run as root), as ourselves otherwise.
as_pg() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

# pg_start creates (once) and starts the throwaway cluster on $PGPORT with
# its socket in $H7_TMP. Settings are PostgreSQL's defaults except
# max_connections (two servers × 32 connections + pgbench) and logging.
pg_start() {
	[ -x "$PGBIN/initdb" ] || die "PostgreSQL server binaries not found (set PGBIN or apt-get install postgresql)"
	if [ ! -f "$PGDATA_DIR/PG_VERSION" ]; then
		mkdir -p "$PGDATA_DIR"
		[ "$(id -u)" = 0 ] && chown postgres "$PGDATA_DIR" "$H7_TMP" && chmod 755 "$H7_TMP"
		as_pg "$PGBIN/initdb" -D "$PGDATA_DIR" -U postgres --auth=trust -E UTF8 >/dev/null
		cat >>"$PGDATA_DIR/postgresql.conf" <<-EOF
			max_connections = 200
			listen_addresses = '127.0.0.1'
			unix_socket_directories = '$H7_TMP'
			logging_collector = off
		EOF
		[ -z "${PG_EXTRA_CONF:-}" ] || printf '%s\n' "$PG_EXTRA_CONF" >>"$PGDATA_DIR/postgresql.conf"
	fi
	as_pg "$PGBIN/pg_ctl" -D "$PGDATA_DIR" -o "-p $PGPORT" -l "$H7_TMP/pg.log" -w start >/dev/null
	[ "$(as_pg "$PGBIN/psql" -h 127.0.0.1 -p "$PGPORT" -U postgres -d postgres -qAtc \
		"SELECT 1 FROM pg_database WHERE datname='ipledger'")" = 1 ] ||
		as_pg "$PGBIN/createdb" -h 127.0.0.1 -p "$PGPORT" -U postgres ipledger
}

pg_stop() { as_pg "$PGBIN/pg_ctl" -D "$PGDATA_DIR" -m "${1:-fast}" -w stop >/dev/null 2>&1 || true; }

pg_is_running() { as_pg "$PGBIN/pg_ctl" -D "$PGDATA_DIR" status >/dev/null 2>&1; }

psql_q() { "$PGBIN/psql" -h 127.0.0.1 -p "$PGPORT" -U postgres -d "${PGDB:-ipledger}" -qAtX -v ON_ERROR_STOP=1 "$@"; }

DB_URL="postgres://postgres@127.0.0.1:$PGPORT/ipledger?sslmode=disable"

# build compiles ipledger and loadgen once per run.
build() {
	mkdir -p "$BIN"
	(cd "$ROOT" && go build -o "$BIN/ipledger" ./cmd/ipledger && go build -o "$BIN/loadgen" ./bench/loadgen)
}

# server_start PORT [extra args…]: starts `ipledger serve` on 127.0.0.1:PORT
# against $DB_URL, logging to $H7_TMP/server-PORT.log, and waits for /readyz.
server_start() {
	local port=$1
	shift
	IPLEDGER_ADMIN_TOKEN=$ADMIN_TOKEN "$BIN/ipledger" serve --listen "127.0.0.1:$port" --database "$DB_URL" "$@" \
		>>"$H7_TMP/server-$port.log" 2>&1 &
	local pid=$!
	SERVER_PIDS+=("$pid")
	eval "SERVER_PID_$port=$pid"
	for _ in $(seq 1 100); do
		if curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || die "server on :$port exited; see $H7_TMP/server-$port.log"
		sleep 0.1
	done
	die "server on :$port not ready after 10 s"
}

server_pid() { eval "echo \${SERVER_PID_$1:-}"; }

# server_stop PORT [SIGNAL]
server_stop() {
	local pid
	pid=$(server_pid "$1")
	kill "-${2:-TERM}" "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

server_rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$(server_pid "$1")/status"; }
server_hwm_kb() { awk '/VmHWM/ {print $2}' "/proc/$(server_pid "$1")/status"; }

# api METHOD PATH [BODY]: one admin call to the first server, failing loudly.
api() {
	local m=$1 p=$2 body=${3:-}
	if [ -n "$body" ]; then
		curl -fsS -X "$m" -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' \
			--data "$body" "http://127.0.0.1:${API_PORT:-$P1}$p"
	else
		curl -fsS -X "$m" -H "Authorization: Bearer $ADMIN_TOKEN" "http://127.0.0.1:${API_PORT:-$P1}$p"
	fi
}

# reset_db drops and recreates the ipledger database (servers stopped).
reset_db() {
	PGDB=postgres psql_q -c "DROP DATABASE IF EXISTS ipledger WITH (FORCE)" -c "CREATE DATABASE ipledger"
}

cleanup() {
	local rc=$?
	for pid in "${SERVER_PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${SERVER_PIDS[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	pg_stop immediate
	if [ "${KEEP_TMP:-}" = 1 ] || [ $rc -ne 0 ]; then
		log "logs kept in $H7_TMP"
	else
		rm -rf "$H7_TMP"
	fi
	exit $rc
}
trap cleanup EXIT

machine_info() {
	echo "- machine: $(nproc) CPU ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(free -g | awk '/Mem:/ {print $2}') GiB RAM, $(uname -sr)"
	echo "- PostgreSQL: $("$PGBIN/postgres" --version), throwaway cluster (initdb defaults, max_connections=200), data on $(df -T "$H7_TMP" | awk 'NR==2 {print $2}')"
	echo "- Go: $(go version | cut -d' ' -f3), ipledger commit $(cd "$ROOT" && git rev-parse --short HEAD)"
	echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'), load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
}
