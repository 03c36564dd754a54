#!/usr/bin/env bash
# Reliability (docs/reliability.md): stop PostgreSQL in the
# middle of a 32-client allocation load against two `ipledger serve`
# processes, keep it down for $DOWN_FOR seconds, start it again, and check
# that
#   - while it is down, the servers answer 503 unavailable (JSON error code
#     "unavailable") to reads, writes and /readyz — not 500, not a hang
#     (every probe must answer within $PROBE_TIMEOUT seconds),
#   - the servers recover by themselves (no restart): /readyz is 200 and an
#     allocation succeeds within $RECOVER_WITHIN seconds of the database
#     being back,
#   - every allocation a client saw acknowledged is in the database, no
#     value is held twice, run_end flags and audit events are consistent,
#   - no site-explorer report (a 4-client ingestion load runs beside the
#     allocations) is half-written: every DPU has its network config and
#     its loopback,
#   - the load saw no 5xx other than 503 and no hang.
#
#   scripts/reliability-pg-restart.sh                       # 30 s load
#   LOAD=12s STOP_AT=3 DOWN_FOR=4 scripts/reliability-pg-restart.sh   # CI form
#
# Exits non-zero on any violation. Only its own PostgreSQL cluster (port
# $PGPORT) is stopped; the machine's PostgreSQL is never touched.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/check-db.sh"

LOAD=${LOAD:-30s}
STOP_AT=${STOP_AT:-8}
DOWN_FOR=${DOWN_FOR:-8}
CLIENTS=${CLIENTS:-32}
# POOLS=N spreads the allocation load over N pools rel-0 … rel-(N-1)
# (at most 32), so that batches of several pools share transactions
# (docs/decisions.md "Guessed batches of several pools share one
# transaction"); by default one pool, rel.
POOLS=${POOLS:-}
PROBE_TIMEOUT=${PROBE_TIMEOUT:-5}
RECOVER_WITHIN=${RECOVER_WITHIN:-10}

log "building"
build
log "starting PostgreSQL on :$PGPORT in $H7_TMP"
pg_start
API_PORT=$P1
server_start $P1
server_start $P2
create_rel_pools

urls=http://127.0.0.1:$P1,http://127.0.0.1:$P2
# The load keeps going through the outage: each client retries its request
# (same owner) until it gets a definite answer.
"$BIN/loadgen" -mode allocate -servers "$urls" -clients "$CLIENTS" -duration "$LOAD" -pools "$LGPOOLS" -retry -allow-unavailable \
	-timeout 15s -acked "$H7_TMP/acked.tsv" -label pg-restart-allocate >"$H7_TMP/load-alloc.json" &
LG=$!
"$BIN/loadgen" -mode ingest -servers "$urls" -clients 4 -dpus 2 -duration "$LOAD" -retry -allow-unavailable \
	-timeout 15s -label pg-restart-ingest >"$H7_TMP/load-ingest.json" &
LG2=$!

# probe NAME METHOD URL [BODY]: one request during the outage; it must be a
# 503 with code "unavailable", answered within PROBE_TIMEOUT seconds.
probe() {
	local name=$1 m=$2 u=$3 body=${4:-} out code t
	out="$H7_TMP/probe.out"
	if [ -n "$body" ]; then
		code=$(curl -s -m "$PROBE_TIMEOUT" -o "$out" -w '%{http_code} %{time_total}' -X "$m" -H "Authorization: Bearer $ADMIN_TOKEN" \
			-H 'Content-Type: application/json' --data "$body" "$u" || true)
	else
		code=$(curl -s -m "$PROBE_TIMEOUT" -o "$out" -w '%{http_code} %{time_total}' -X "$m" -H "Authorization: Bearer $ADMIN_TOKEN" "$u" || true)
	fi
	t=${code#* }
	code=${code%% *}
	log "  probe $name: HTTP $code in ${t}s: $(head -c 200 "$out" 2>/dev/null)"
	if [ "$code" = 000 ]; then
		violation "$name: no answer within ${PROBE_TIMEOUT}s while the database is down (hang)"
	elif [ "$code" != 503 ]; then
		violation "$name: HTTP $code while the database is down, want 503"
	elif ! grep -q '"code":"unavailable"' "$out"; then
		violation "$name: 503 without the error code \"unavailable\""
	fi
}

sleep "$STOP_AT"
log "stopping PostgreSQL (fast shutdown) with $(psql_q -c 'SELECT count(*) FROM allocations') allocations stored"
pg_stop fast
down_at=$(date +%s)
sleep 1
n=0
while [ $(($(date +%s) - down_at)) -lt "$DOWN_FOR" ]; do
	n=$((n + 1))
	for port in $P1 $P2; do
		probe "round $n :$port POST allocation" POST "http://127.0.0.1:$port/api/v1/pools/${RELPOOLS[0]}/allocations" \
			"{\"owner_type\":\"probe\",\"owner_id\":\"down-$n-$port\"}"
		probe "round $n :$port GET pool" GET "http://127.0.0.1:$port/api/v1/pools/${RELPOOLS[0]}"
		probe "round $n :$port GET allocations" GET "http://127.0.0.1:$port/api/v1/pools/${RELPOOLS[0]}/allocations?limit=10"
		probe "round $n :$port GET /readyz" GET "http://127.0.0.1:$port/readyz"
	done
	sleep 1
done
log "starting PostgreSQL again after $(($(date +%s) - down_at)) s down"
pg_start
up_at=$(date +%s)
for port in $P1 $P2; do
	ok=0
	while [ $(($(date +%s) - up_at)) -le "$RECOVER_WITHIN" ]; do
		if curl -fsS -m 5 "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 &&
			curl -fsS -m 5 -X POST -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' \
				--data "{\"owner_type\":\"probe\",\"owner_id\":\"after-$port\"}" "http://127.0.0.1:$port/api/v1/pools/${RELPOOLS[0]}/allocations" >/dev/null; then
			ok=1
			break
		fi
		sleep 0.5
	done
	if [ $ok = 1 ]; then
		log "server :$port recovered by itself $(($(date +%s) - up_at)) s after the database came back"
	else
		violation "server :$port did not recover within ${RECOVER_WITHIN}s of the database coming back"
	fi
	kill -0 "$(server_pid $port)" 2>/dev/null || violation "server :$port exited during the outage"
done
wait $LG || true
wait $LG2 || true

line=$(cat "$H7_TMP/load-alloc.json")
log "allocation load: $line"
check_loadgen "$line"
ingest_line=$(cat "$H7_TMP/load-ingest.json")
log "ingestion load: $ingest_line"
check_loadgen "$ingest_line"
check_acked "$H7_TMP/acked.tsv"
check_unique
for p in "${RELPOOLS[@]}"; do check_run_ends "$p"; done
check_ingestion
if grep -q '"status":500' "$H7_TMP"/server-*.log; then
	violation "the servers logged 500 answers: $(grep -c '"status":500' "$H7_TMP"/server-*.log | tr '\n' ' ')"
fi
log "violations: $VIOLATIONS"
[ "$VIOLATIONS" = 0 ] || die "$VIOLATIONS violations"
log "PASS"
