#!/usr/bin/env bash
# Where an automatic allocation's time goes on the database side: runs
# $N allocations through the REST API with $CLIENTS clients (default 1) against a throwaway
# PostgreSQL with pg_stat_statements, then prints the statements per
# allocation (calls / N) with their mean execution time, and the same for
# pgbench's single-row INSERT. Used for the analysis in docs/benchmarks.md
# "Where an allocation's time goes".
source "$(dirname "$0")/lib.sh"
N=${N:-1000}
CLIENTS=${CLIENTS:-1} # concurrent clients (1: the per-statement view; 8: with group commit)
PG_EXTRA_CONF="shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.track = all
pg_stat_statements.track_planning = on"
export PG_EXTRA_CONF
build
pg_start
psql_q -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
server_start $P1
api POST /api/v1/pools '{"name":"prof","type":"ipv4","ranges":[{"first":"10.0.0.0","last":"10.255.255.255"}]}' >/dev/null
"$BIN/loadgen" -mode allocate -servers http://127.0.0.1:$P1 -clients 1 -requests 50 -duration 0 -pools prof >/dev/null
psql_q -c "SELECT pg_stat_statements_reset()" >/dev/null
line=$("$BIN/loadgen" -mode allocate -servers http://127.0.0.1:$P1 -clients "${CLIENTS:-1}" -requests "$N" -duration 0 -pools prof)
echo "loadgen: $line"
echo
echo "statements per allocation (calls / $N), plannings per allocation, mean execution ms, mean planning ms, share of database time, by database time:"
psql_q -F ' | ' -c "SELECT round(calls::numeric / $N, 2), round(plans::numeric / $N, 2), round(mean_exec_time::numeric, 3), round(mean_plan_time::numeric, 3),
  round(100 * total_exec_time / sum(total_exec_time) OVER ()) || ' %', left(regexp_replace(query, '\s+', ' ', 'g'), 110)
  FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'ipledger') AND calls >= $N / 100
  ORDER BY total_exec_time DESC LIMIT 20"
echo
echo "total statements per allocation (including BEGIN/COMMIT): $(psql_q -c "SELECT round(sum(calls)::numeric / $N, 1) FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'ipledger')")"
