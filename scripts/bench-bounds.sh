#!/usr/bin/env bash
# What bounds automatic allocation at 8 clients (docs/benchmarks.md "What
# bounds one pool at 8 clients"): the REST allocation load of
# bench-throughput.sh (one pool, one server, $CLIENTS clients) run on a
# fresh database as shipped, then with parts of the work taken away that
# ipledger must not drop — they are diagnosis only, never settings to run
# with:
#
#   runtime   the server with GOMAXPROCS=1 GOGC=400 (fewer Go scheduler
#             hand-offs and collections on the shared 2 cores)
#   no-trig   + the INSERT triggers of allocations and audit_events and the
#             allocations→pools foreign key dropped (range check, counters,
#             usage days, pool existence)
#   no-sync   + synchronous_commit=off (a commit no longer waits for its WAL
#             flush: an acknowledged allocation could be lost)
#
# next to the database's ceiling (pgbench, one single-row INSERT per
# transaction) and an HTTP floor (GET /healthz: no authentication, no database). For
# each it prints per second, p99, and CPU per operation of the server,
# PostgreSQL (its backends and background processes) and the whole machine
# (/proc/stat; the load generator is most of the rest).
#
#   scripts/bench-bounds.sh                 # 10 s per cell, 2 rounds
#   DURATION=5s ROUNDS=1 scripts/bench-bounds.sh
source "$(dirname "$0")/lib.sh"

DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-2}
CLIENTS=${CLIENTS:-8}
secs=${DURATION%s}
tick=$(getconf CLK_TCK)

log "building"
build
log "starting PostgreSQL on :$PGPORT in $H7_TMP"
pg_start

proc_cpu() { awk '{print $14+$15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# pg_cpu: the postmaster's CPU with that of its children that have exited
# (pgbench's backends end with it), plus its live children's.
pg_cpu() {
	local pm s p
	pm=$(head -1 "$PGDATA_DIR/postmaster.pid")
	s=$(awk '{print $14+$15+$16+$17}' "/proc/$pm/stat")
	for p in $(pgrep -P "$pm" || true); do
		s=$((s + $(proc_cpu "$p")))
	done
	echo "$s"
}
machine_cpu() { awk '/^cpu / {print $2+$3+$4+$6+$7+$8}' /proc/stat; }

# measure LABEL SERVER_PID CMD…: runs CMD (which prints n on its last line
# as "n=<count> p99=<ms>"), prints the row.
measure() {
	local label=$1 spid=$2
	shift 2
	local s0 p0 t0 s1 p1 t1 out n p99
	s0=$([ -n "$spid" ] && proc_cpu "$spid" || echo 0)
	p0=$(pg_cpu)
	t0=$(machine_cpu)
	out=$("$@" | tail -1)
	s1=$([ -n "$spid" ] && proc_cpu "$spid" || echo 0)
	p1=$(pg_cpu)
	t1=$(machine_cpu)
	n=${out#n=}
	n=${n%% *}
	p99=${out##*p99=}
	python3 - "$label" "$n" "$p99" "$secs" "$tick" "$s0" "$s1" "$p0" "$p1" "$t0" "$t1" <<-'PY'
		import sys
		label, n, p99, secs, tick = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
		s0, s1, p0, p1, t0, t1 = map(int, sys.argv[6:12])
		us = lambda a, b: (b - a) / tick * 1e6 / max(n, 1)
		srv = "–" if s1 == 0 else "%.0f" % us(s0, s1)
		print("| %s | %.0f | %s | %s | %.0f | %.0f |" % (label, n / secs, p99, srv, us(p0, p1), us(t0, t1)))
	PY
}

pgbench_run() {
	local out
	out=$(cd "$H7_TMP" && "$PGBIN/pgbench" -h 127.0.0.1 -p "$PGPORT" -U postgres -n -M prepared -c "$CLIENTS" -j $((CLIENTS > 4 ? 4 : CLIENTS)) \
		-T "$secs" -r -f "$H7_TMP/insert.sql" ipledger 2>/dev/null)
	echo "n=$(echo "$out" | awk '/number of transactions actually processed/ {split($NF, a, "/"); print a[1]}') p99=–"
}

loadgen_run() { # mode extra…
	local mode=$1
	shift
	"$BIN/loadgen" -mode "$mode" -servers "http://127.0.0.1:$P1" -clients "$CLIENTS" -duration "$DURATION" -timeout 30s "$@" |
		python3 -c 'import json,sys; d=json.load(sys.stdin); print("n=%d p99=%s" % (d["ok"], d["p99_ms"]))'
}

# variant NAME: a fresh database and server, set up as NAME says, a 2 s
# warm-up, then the measured run.
variant() {
	local name=$1 env=() sql=()
	case $name in
	shipped) ;;
	runtime) env=(GOMAXPROCS=1 GOGC=400) ;;
	no-trig)
		env=(GOMAXPROCS=1 GOGC=400)
		sql=("DROP TRIGGER audit_events_usage_day ON audit_events; DROP TRIGGER allocations_count_insert ON allocations; DROP TRIGGER allocations_in_range_insert ON allocations; ALTER TABLE allocations DROP CONSTRAINT allocations_pool_id_fkey")
		;;
	no-sync)
		env=(GOMAXPROCS=1 GOGC=400)
		sql=("DROP TRIGGER audit_events_usage_day ON audit_events; DROP TRIGGER allocations_count_insert ON allocations; DROP TRIGGER allocations_in_range_insert ON allocations; ALTER TABLE allocations DROP CONSTRAINT allocations_pool_id_fkey")
		;;
	esac
	reset_db >/dev/null
	env "${env[@]}" IPLEDGER_ADMIN_TOKEN=$ADMIN_TOKEN "$BIN/ipledger" serve --listen "127.0.0.1:$P1" --database "$DB_URL" \
		>>"$H7_TMP/server-$P1.log" 2>&1 &
	local pid=$!
	for _ in $(seq 1 100); do
		curl -fsS "http://127.0.0.1:$P1/readyz" >/dev/null 2>&1 && break
		sleep 0.1
	done
	API_PORT=$P1 api POST /api/v1/pools '{"name":"bench","type":"ipv4","ranges":[{"first":"10.0.0.0","last":"10.255.255.255","auto_assign":true}]}' >/dev/null
	[ ${#sql[@]} = 0 ] || psql_q -c "${sql[0]}" >/dev/null
	if [ "$name" = no-sync ]; then
		psql_q -c "ALTER SYSTEM SET synchronous_commit = off" >/dev/null
		psql_q -c "SELECT pg_reload_conf()" >/dev/null
		sleep 0.2
	fi
	"$BIN/loadgen" -mode allocate -servers "http://127.0.0.1:$P1" -clients "$CLIENTS" -duration 2s -pools bench >/dev/null
	measure "REST allocation, $name" "$pid" loadgen_run allocate -pools bench
	if [ "$name" = shipped ]; then
		measure "HTTP floor: GET /healthz" "$pid" loadgen_run get -paths /healthz
	fi
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	if [ "$name" = no-sync ]; then
		psql_q -c "ALTER SYSTEM RESET synchronous_commit" >/dev/null
		psql_q -c "SELECT pg_reload_conf()" >/dev/null
	fi
}

echo "INSERT INTO pgbench_single (owner) VALUES ('bench');" >"$H7_TMP/insert.sql"
echo
machine_info
echo "- clients: $CLIENTS, $DURATION per cell, $ROUNDS round(s); CPU in µs per operation"
echo
echo "| run | per second | p99 ms | server | PostgreSQL | machine |"
echo "|---|---|---|---|---|---|"
for _ in $(seq 1 "$ROUNDS"); do
	reset_db >/dev/null
	psql_q -c "CREATE TABLE pgbench_single (id bigserial PRIMARY KEY, owner text NOT NULL, at timestamptz NOT NULL DEFAULT now())"
	measure "pgbench single-row INSERT" "" pgbench_run
	for v in shipped runtime no-trig no-sync; do
		variant $v
	done
done
