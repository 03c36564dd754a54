#!/usr/bin/env bash
# The change feed's ordering proof (docs/reliability.md "Change feed"):
# two `ipledger serve` processes on one PostgreSQL, 8 writers on 3 pools
# (bench/feedcheck), and a reader that resumes after every page with
# after= on alternating servers. Half-way, one server is killed with
# kill -9 and restarted. The reader must see every stored event exactly
# once and in revision order, revisions 1..N without a gap, and every
# acknowledged allocation's event.
#
#   scripts/feed-order.sh                    # 100,000 writes
#   EVENTS=10000 scripts/feed-order.sh       # a short run
#   MODE=latency scripts/feed-order.sh       # wake-up latency p50/p99
#
# Exits non-zero on any violation. Runs its own PostgreSQL on $PGPORT.
source "$(dirname "$0")/lib.sh"

EVENTS=${EVENTS:-100000}
WRITERS=${WRITERS:-8}
MODE=${MODE:-order}
DOWN_FOR=${DOWN_FOR:-2}

log "building"
build
(cd "$ROOT" && go build -o "$BIN/feedcheck" ./bench/feedcheck)
log "starting PostgreSQL on :$PGPORT in $H7_TMP"
pg_start
server_start $P1
server_start $P2
urls=http://127.0.0.1:$P1,http://127.0.0.1:$P2

if [ "$MODE" = latency ]; then
	"$BIN/feedcheck" -mode latency -servers "$urls" -samples "${SAMPLES:-400}" -every "${EVERY:-25ms}"
	exit 0
fi

"$BIN/feedcheck" -mode order -servers "$urls" -writers "$WRITERS" -events "$EVENTS" -database "$DB_URL" \
	-progress "$H7_TMP/progress" >"$H7_TMP/result.json" &
FC=$!
half=$((EVENTS / 2))
while kill -0 $FC 2>/dev/null; do
	n=$(cat "$H7_TMP/progress" 2>/dev/null || echo 0)
	[ "$n" -ge "$half" ] && break
	sleep 0.2
done
victim=$(server_pid $P1)
log "kill -9 server :$P1 (pid $victim) after $(cat "$H7_TMP/progress") acknowledged writes; $(psql_q -c "SELECT count(*) FILTER (WHERE revision IS NULL) || ' of ' || count(*) FROM audit_events") events without a revision"
kill -KILL "$victim"
wait "$victim" 2>/dev/null || true
sleep "$DOWN_FOR"
log "restarting :$P1"
server_start $P1
rc=0
wait $FC || rc=$?
cat "$H7_TMP/result.json"
log "duplicate revisions in the database: $(psql_q -c "SELECT count(*) - count(DISTINCT revision) FROM audit_events")"
[ $rc = 0 ] || die "the feed check found violations (see above)"
log "OK"
