#!/usr/bin/env bash
# What the change feed costs an allocation (docs/benchmarks.md "Change
# feed"): automatic allocations per second through one `ipledger serve`
# at 8 and 32 clients, for
#   base     the build of $BASE (default main), without the feed,
#   feed     this build (sequencer numbering events after commit),
#   trigger  this build plus a statement-level AFTER INSERT trigger on
#            audit_events that calls pg_notify (the design that wakes
#            the sequencer from inside every writing transaction),
# in interleaved rounds so that a busy shared machine affects each alike.
#
#   scripts/bench-feed-cost.sh
#   DURATION=10s ROUNDS=3 CLIENTS="8 32" scripts/bench-feed-cost.sh
source "$(dirname "$0")/lib.sh"

DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-2}
CLIENTS=${CLIENTS:-8 32}
BASE=${BASE:-main}

log "building this tree and $BASE"
build
mkdir -p "$H7_TMP/base"
(cd "$ROOT" && git archive "$BASE" | tar -x -C "$H7_TMP/base")
(cd "$H7_TMP/base" && go build -o "$BIN/ipledger-base" ./cmd/ipledger)
pg_start

# run_variant VARIANT CLIENTS sets RATE to the allocations per second of
# one run (in this shell, so that the server it starts is cleaned up).
run_variant() {
	local variant=$1 c=$2 bin=$BIN/ipledger
	[ -z "$(server_pid $P1)" ] || server_stop $P1
	reset_db
	[ "$variant" = base ] && bin=$BIN/ipledger-base
	"$bin" migrate --database "$DB_URL" >/dev/null
	if [ "$variant" = trigger ]; then
		psql_q -c "CREATE FUNCTION bench_feed_notify() RETURNS trigger LANGUAGE plpgsql AS \$\$ BEGIN PERFORM pg_notify('ipledger_feed_wake', ''); RETURN NULL; END \$\$" \
			-c "CREATE TRIGGER bench_feed_notify AFTER INSERT ON audit_events FOR EACH STATEMENT EXECUTE FUNCTION bench_feed_notify()"
	fi
	IPLEDGER_ADMIN_TOKEN=$ADMIN_TOKEN "$bin" serve --listen "127.0.0.1:$P1" --database "$DB_URL" >>"$H7_TMP/server-$P1.log" 2>&1 &
	local pid=$!
	SERVER_PIDS+=("$pid")
	eval "SERVER_PID_$P1=$pid"
	for _ in $(seq 1 100); do curl -fsS "http://127.0.0.1:$P1/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
	api POST /api/v1/pools '{"name":"bench","type":"ipv4","ranges":[{"first":"10.0.0.0","last":"10.255.255.255"}]}' >/dev/null
	local before after cpu0 cpu1
	before=$(psql_q -c "SELECT xact_commit || ' ' || pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0') FROM pg_stat_database WHERE datname = 'ipledger'")
	cpu0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
	"$BIN/loadgen" -mode allocate -servers "http://127.0.0.1:$P1" -clients "$c" -duration "$DURATION" -pools bench -label "$variant" >"$H7_TMP/run.json"
	cpu1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
	sleep 1.5 # PostgreSQL publishes its counters at most once a second
	after=$(psql_q -c "SELECT xact_commit || ' ' || pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0') FROM pg_stat_database WHERE datname = 'ipledger'")
	RATE=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1])); ok = d["ok"]
c0, w0 = map(float, sys.argv[2].split()); c1, w1 = map(float, sys.argv[3].split())
ticks = float(sys.argv[5]) - float(sys.argv[4])
print("%d / %.2f / %.0f / %.0f" % (round(d["per_second"]), (c1 - c0) / ok, (w1 - w0) / ok, ticks * 10000 / ok))
' "$H7_TMP/run.json" "$before" "$after" "$cpu0" "$cpu1")
	server_stop $P1
	eval "SERVER_PID_$P1="
}

echo "Each cell: allocations/s / commits per allocation / WAL bytes per allocation / server CPU µs per allocation"
echo
echo "| round | clients | base | feed | trigger |"
echo "|---|---|---|---|---|"
for r in $(seq 1 "$ROUNDS"); do
	for c in $CLIENTS; do
		run_variant base "$c"
		b=$RATE
		run_variant feed "$c"
		f=$RATE
		run_variant trigger "$c"
		echo "| $r | $c | $b | $f | $RATE |"
	done
done
machine_info
