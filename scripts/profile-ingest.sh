#!/usr/bin/env bash
# Where the time of a site-explorer report goes (docs/benchmarks.md
# "Where a report's time goes"): N reports of a new host with 2 DPUs
# (lo-ip and lo-ip-v6 defined, no reservations) from CLIENTS clients
# against one server, then, per report:
#   - the statements PostgreSQL ran (pg_stat_statements, nested ones such
#     as trigger and foreign-key statements included) and its execution
#     time, by statement;
#   - the CPU time of the server process and of PostgreSQL's processes.
#
#   scripts/profile-ingest.sh                  # 1 client, 1000 reports
#   CLIENTS=8 N=4000 scripts/profile-ingest.sh
#   RESERVED=1 CLIENTS=8 N=4000 scripts/profile-ingest.sh   # every DPU's loopbacks reserved first
#
# Runs its own PostgreSQL cluster; never touches the machine's PostgreSQL.
P1=${P1:-18491}
PGPORT=${PGPORT:-55491}
source "$(dirname "$0")/lib.sh"
N=${N:-1000}
CLIENTS=${CLIENTS:-1}
PG_EXTRA_CONF="shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.track = all"
export PG_EXTRA_CONF
build
(cd "$ROOT" && go build -o "$BIN/emgen" ./bench/emgen)
pg_start
psql_q -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null
server_start "$P1"
"$BIN/emgen" -ingest-run x -pools >"$H7_TMP/pools.toml"
curl -fsS -X POST -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/toml' \
	--data-binary "@$H7_TMP/pools.toml" "http://127.0.0.1:$P1/api/v1/pools:load" >/dev/null
"$BIN/loadgen" -mode ingest -servers "http://127.0.0.1:$P1" -clients 1 -requests 50 -duration 0 -run warm >/dev/null
if [ "${RESERVED:-}" = 1 ]; then
	"$BIN/emgen" -ingest-run prof -clients "$CLIENTS" -per $(((N + CLIENTS - 1) / CLIENTS)) >"$H7_TMP/resv.json"
	curl -fsS -o /dev/null -X PUT -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' \
		--data-binary "@$H7_TMP/resv.json" "http://127.0.0.1:$P1/api/v1/expected-machines"
	for _ in $(seq 1 100); do
		[ "$(psql_q -c "SELECT count(*) FROM audit_events WHERE revision IS NULL")" = 0 ] && break
		sleep 0.2
	done
fi
sleep 1
psql_q -c "SELECT pg_stat_statements_reset()" >/dev/null

cpu() { # pid… → clock ticks of user+system time
	local t=0 p
	for p in "$@"; do
		[ -r "/proc/$p/stat" ] && t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat")))
	done
	echo "$t"
}
pgpids() { # this cluster's postmaster and its children
	local pm
	pm=$(head -1 "$PGDATA_DIR/postmaster.pid")
	echo "$pm" $(pgrep -P "$pm")
}
spid=$(server_pid "$P1")
s0=$(cpu "$spid")
p0=$(cpu $(pgpids))
line=$("$BIN/loadgen" -mode ingest -servers "http://127.0.0.1:$P1" -clients "$CLIENTS" -requests "$N" -duration 0 -run prof)
s1=$(cpu "$spid")
p1=$(cpu $(pgpids))
hz=$(getconf CLK_TCK)
echo "loadgen: $line"
echo
machine_info
echo "- $CLIENTS clients, $N reports of a host with 2 DPUs$([ "${RESERVED:-}" = 1 ] && echo ', both loopbacks of every DPU reserved')"
echo "- CPU per report: server $(python3 -c "print(round(($s1 - $s0) / $hz / $N * 1e6))") µs, PostgreSQL $(python3 -c "print(round(($p1 - $p0) / $hz / $N * 1e6))") µs (the cluster's processes)"
echo "- statements per report (nested included) and PostgreSQL execution ms per report: $(psql_q -F ' / ' -c "SELECT round(sum(calls)::numeric / $N, 1), round(sum(total_exec_time)::numeric / $N, 3) FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'ipledger')")"
echo
echo "| calls per report | mean ms | ms per report | statement |"
echo "|---|---|---|---|"
psql_q -F ' | ' -c "SELECT '| ' || round(calls::numeric / $N, 2), round(mean_exec_time::numeric, 3), round(total_exec_time::numeric / $N, 3),
  left(regexp_replace(query, '\s+', ' ', 'g'), 90) || ' |'
  FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'ipledger') AND calls >= $N / 100
  ORDER BY total_exec_time DESC LIMIT 15"
