#!/usr/bin/env bash
# Reliability (docs/reliability.md): kill -9 one of two
# `ipledger serve` processes in the middle of a 32-client allocation load
# (plus a DPU ingestion load when the site-explorer route exists), restart
# it, and check that
#   - every allocation a client saw acknowledged is in the database,
#   - no value is held twice and no owner holds two values of a pool,
#   - the gap-search run_end flags and the audit events are consistent,
#   - no ingestion is half-written (a DPU with a machine row but no network
#     config, or no loopback while lo-ip had space),
#   - clients saw no 5xx other than 503 and no hang.
# Clients retry a request that got no answer (allocation is idempotent by
# owner), so a lost answer is retried against the restarted server.
#
#   scripts/reliability-kill9.sh                 # 30 s load, kill at 10 s
#   LOAD=10s KILL_AT=4 scripts/reliability-kill9.sh   # the CI form
#   DB=sqlite LOAD=10s KILL_AT=4 scripts/reliability-kill9.sh   # both servers on one SQLite file
#
# Exits non-zero on any violation. Runs its own PostgreSQL on $PGPORT, or
# with DB=sqlite a fresh SQLite file (checked with the sqlite3 CLI).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/check-db.sh"

LOAD=${LOAD:-30s}
KILL_AT=${KILL_AT:-10}
DOWN_FOR=${DOWN_FOR:-2}
CLIENTS=${CLIENTS:-32}
# POOLS=N spreads the allocation load over N pools rel-0 … rel-(N-1)
# (at most 32), so that batches of several pools share transactions
# (docs/decisions.md "Guessed batches of several pools share one
# transaction"); by default one pool, rel.
POOLS=${POOLS:-}

DB=${DB:-postgres}
log "building"
build
case "$DB" in
postgres)
	log "starting PostgreSQL on :$PGPORT in $H7_TMP"
	pg_start
	;;
sqlite)
	command -v sqlite3 >/dev/null || die "DB=sqlite needs the sqlite3 CLI (apt-get install sqlite3)"
	SQLITE_FILE=$H7_TMP/kill9.db
	DB_URL="sqlite:$SQLITE_FILE"
	;;
*) die "DB=$DB: want postgres or sqlite" ;;
esac
API_PORT=$P1
server_start $P1
server_start $P2
create_rel_pools

ingest=0
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' \
	--data '{}' http://127.0.0.1:$P1/api/v1/site-explorer/reports)
if [ "$code" != 404 ] && [ "$code" != 405 ]; then
	ingest=1
fi
log "site-explorer reports route: HTTP $code on an empty body → ingestion load $([ $ingest = 1 ] && echo on || echo 'off (route absent)')"

urls=http://127.0.0.1:$P1,http://127.0.0.1:$P2
"$BIN/loadgen" -mode allocate -servers "$urls" -clients "$CLIENTS" -duration "$LOAD" -pools "$LGPOOLS" -retry -allow-unavailable \
	-timeout 15s -acked "$H7_TMP/acked.tsv" -label kill9-allocate >"$H7_TMP/load-alloc.json" &
LG1=$!
if [ $ingest = 1 ]; then
	"$BIN/loadgen" -mode ingest -servers "$urls" -clients 4 -dpus 2 -duration "$LOAD" -retry -allow-unavailable \
		-timeout 15s -label kill9-ingest >"$H7_TMP/load-ingest.json" &
	LG2=$!
fi

sleep "$KILL_AT"
victim=$(server_pid $P1)
before=$(db_q "SELECT count(*) FROM allocations")
log "kill -9 server :$P1 (pid $victim) with $before allocations stored"
kill -KILL "$victim"
wait "$victim" 2>/dev/null || true
sleep "$DOWN_FOR"
log "restarting server :$P1"
server_start $P1
wait $LG1 || true
[ $ingest = 1 ] && { wait "$LG2" || true; }

alloc_line=$(cat "$H7_TMP/load-alloc.json")
log "allocation load: $alloc_line"
check_loadgen "$alloc_line"
if [ $ingest = 1 ]; then
	ingest_line=$(cat "$H7_TMP/load-ingest.json")
	log "ingestion load: $ingest_line"
	check_loadgen "$ingest_line"
fi
acked_after_restart=$(printf '%s' "$alloc_line" | grep -o '"acknowledged":[0-9]*' | cut -d: -f2)
check_acked "$H7_TMP/acked.tsv"
check_unique
for p in "${RELPOOLS[@]}"; do check_run_ends "$p"; done
[ $ingest = 1 ] && check_ingestion
if grep -q '"level":"ERROR"' "$H7_TMP"/server-*.log; then
	log "server errors logged:"
	grep '"level":"ERROR"' "$H7_TMP"/server-*.log | head -5 >&2
fi
log "acknowledged: $acked_after_restart; violations: $VIOLATIONS"
[ "$VIOLATIONS" = 0 ] || die "$VIOLATIONS violations"
log "PASS"
