#!/usr/bin/env bash
# Reliability (docs/reliability.md, "PostgreSQL failover"): a primary and
# a streaming standby started by this script on this machine, two
# `ipledger serve` processes given the multi-host URL
#   postgres://127.0.0.1:A,127.0.0.1:B/ipledger?target_session_attrs=read-write
# a load of allocations (8 clients), site-explorer reports (2 clients) and
# webhook deliveries of every event to a local receiver; in the middle of
# it the primary is killed (pg_ctl stop -m immediate) and the standby
# promoted. Afterwards, on the new primary:
#   - every allocation a client saw acknowledged is stored, for its owner,
#   - no value is held twice, run_end flags and audit events agree, no
#     report is half-written,
#   - `ipledger check` is clean (revisions 1..N without a gap, counters, …),
#   - every delivery is delivered and the receiver saw each of them,
#     including those of events after the failover (deliveries resumed),
#   - the servers answered only 2xx/4xx/503 (no 500) and recovered
#     without a restart; the error window (first to last 503) is reported.
# The run is made once with synchronous replication (nothing acknowledged
# may be lost: a violation otherwise) and once with asynchronous
# replication, with the standby cut off $ASYNC_LAG seconds before the
# crash, where what it had not received is lost and is reported, not
# failed: allocations acknowledged and gone, values handed
# out again to another owner, webhook deliveries of events that no longer
# exist.
#
#   scripts/reliability-failover.sh                       # both modes, 24 s load each
#   MODES=sync LOAD=12s KILL_AT=5 scripts/reliability-failover.sh   # a short run
#
# Loopback only; its own two clusters on ports $PGA and $PGB (run as the
# postgres user when started as root); stops everything it started.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/check-db.sh"

MODES=${MODES:-sync async}
LOAD=${LOAD:-24s}
KILL_AT=${KILL_AT:-10}
CLIENTS=${CLIENTS:-8}
PGA=${PGA:-55441}
PGB=${PGB:-55442}
SINK_PORT=${SINK_PORT:-18093}
DRAIN_WITHIN=${DRAIN_WITHIN:-60}
# Seconds before the crash at which the asynchronous standby stops
# receiving WAL (0: it keeps up until the crash, and usually loses nothing
# on one machine).
ASYNC_LAG=${ASYNC_LAG:-2}
SECRET=failover-webhook-secret-0123456789
RESULTS=()

CLUSTERS=()
stop_clusters() {
	local d
	for d in "${CLUSTERS[@]}"; do
		as_pg "$PGBIN/pg_ctl" -D "$d" -m immediate -w stop >/dev/null 2>&1 || true
	done
}
# Servers first (they would wait for a database that is gone), then the
# clusters, then lib.sh's cleanup.
stop_servers() {
	local pid
	for pid in "${SERVER_PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for _ in $(seq 1 100); do
		local alive=0
		for pid in "${SERVER_PIDS[@]}"; do
			kill -0 "$pid" 2>/dev/null && alive=1
		done
		[ $alive = 0 ] && return
		sleep 0.1
	done
	for pid in "${SERVER_PIDS[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
	done
}
trap 'rc=$?; stop_servers; stop_clusters; (exit $rc); cleanup' EXIT

now_ms() { date +%s%3N; }
psql_at() { "$PGBIN/psql" -h 127.0.0.1 -p "$1" -U postgres -d ipledger -qAtX -v ON_ERROR_STOP=1 "${@:2}"; }

# cluster_primary DIR PORT: initdb and start a primary (synchronous
# replication is switched on once the standby streams: until then a
# commit would wait for it).
cluster_primary() {
	local dir=$1 port=$2
	mkdir -p "$dir"
	[ "$(id -u)" != 0 ] || chown postgres "$dir"
	as_pg "$PGBIN/initdb" -D "$dir" -U postgres --auth=trust -E UTF8 >/dev/null
	cat >>"$dir/postgresql.conf" <<-EOF
		port = $port
		max_connections = 200
		listen_addresses = '127.0.0.1'
		unix_socket_directories = '$H7_TMP'
		logging_collector = off
		wal_level = replica
		max_wal_senders = 4
		hot_standby = on
		synchronous_commit = on
	EOF
	CLUSTERS+=("$dir")
	as_pg "$PGBIN/pg_ctl" -D "$dir" -l "$dir.log" -w start >/dev/null
	"$PGBIN/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -qAtX -c "CREATE DATABASE ipledger"
}

# cluster_standby DIR PORT PRIMARY_PORT: a streaming standby of the primary.
cluster_standby() {
	local dir=$1 port=$2 primary=$3
	mkdir -m 700 -p "$dir"
	[ "$(id -u)" != 0 ] || chown postgres "$dir"
	as_pg "$PGBIN/pg_basebackup" -D "$dir" -d "host=127.0.0.1 port=$primary user=postgres application_name=standby1" \
		-R -X stream -c fast >/dev/null
	echo "port = $port" | as_pg tee -a "$dir/postgresql.conf" >/dev/null
	CLUSTERS+=("$dir")
	as_pg "$PGBIN/pg_ctl" -D "$dir" -l "$dir.log" -w start >/dev/null
}

# window_503 FROM_MS: count, first and last time (ms) of 503 answers in the
# servers' access logs at or after FROM_MS.
window_503() {
	cat "$H7_TMP"/server-*.log | { grep '"status":503' || true; } | { grep -o '"time":"[^"]*"' || true; } | cut -d'"' -f4 |
		while read -r t; do date -d "$t" +%s%3N; done | sort -n |
		awk -v from="$1" '$1 >= from {n++; if (!f) f = $1; l = $1} END {printf "%d %d %d\n", n, f, l}'
}

run_mode() {
	local mode=$1 dir=$H7_TMP/$1 names=''
	[ "$mode" = sync ] && names=standby1
	mkdir -p "$dir"
	[ "$(id -u)" != 0 ] || chown postgres "$dir"
	log "[$mode] primary on :$PGA, standby on :$PGB ($mode replication)"
	cluster_primary "$dir/a" "$PGA"
	cluster_standby "$dir/b" "$PGB" "$PGA"
	psql_at "$PGA" -c "ALTER SYSTEM SET synchronous_standby_names = '$names'" -c "SELECT pg_reload_conf()" >/dev/null
	local state=''
	for _ in $(seq 1 100); do
		state=$(psql_at "$PGA" -c "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby1' AND state = 'streaming'")
		[ "$state" = "$mode" ] && break
		sleep 0.1
	done
	[ "$state" = "$mode" ] || die "[$mode] standby replication state is '$state', want $mode"

	PGPORT=$PGA
	DB_URL="postgres://postgres@127.0.0.1:$PGA,127.0.0.1:$PGB/ipledger?sslmode=disable&target_session_attrs=read-write"
	: >"$H7_TMP/server-$P1.log"
	: >"$H7_TMP/server-$P2.log"
	server_start $P1
	server_start $P2
	"$BIN/hooksink" -listen "127.0.0.1:$SINK_PORT" -out "$dir/sink.tsv" -secret "$SECRET" 2>>"$dir/sink.log" &
	local sink=$!
	SERVER_PIDS+=("$sink")
	API_PORT=$P1
	create_rel_pools
	api POST /api/v1/webhooks "{\"name\":\"sink\",\"url\":\"http://127.0.0.1:$SINK_PORT/\",\"secret\":\"$SECRET\",\"actions\":[\"*\"]}" >/dev/null

	local urls=http://127.0.0.1:$P1,http://127.0.0.1:$P2
	"$BIN/loadgen" -mode allocate -servers "$urls" -clients "$CLIENTS" -duration "$LOAD" -pools "$LGPOOLS" -retry -allow-unavailable \
		-timeout 15s -acked "$dir/acked.tsv" -run "fo-$mode" -label "failover-$mode-allocate" >"$dir/load-alloc.json" &
	local lg=$!
	"$BIN/loadgen" -mode ingest -servers "$urls" -clients 2 -dpus 2 -duration "$LOAD" -retry -allow-unavailable \
		-timeout 15s -run "fo-$mode" -label "failover-$mode-ingest" >"$dir/load-ingest.json" &
	local lg2=$!

	if [ "$mode" = async ] && [ "$ASYNC_LAG" != 0 ]; then
		# An asynchronous standby that fell behind (a slow link, a
		# partition): it stops receiving ASYNC_LAG seconds before the crash,
		# so what the primary acknowledged meanwhile exists nowhere else.
		sleep "$((KILL_AT - ASYNC_LAG))"
		psql_at "$PGB" -c "ALTER SYSTEM SET primary_conninfo = ''" -c "SELECT pg_reload_conf()" >/dev/null
		log "[$mode] standby cut off from the primary $ASYNC_LAG s before the crash"
		sleep "$ASYNC_LAG"
	else
		sleep "$KILL_AT"
	fi
	local acked_before head_before kill_ms promoted_ms
	acked_before=$(wc -l <"$dir/acked.tsv")
	head_before=$(psql_q -c "SELECT COALESCE(MAX(revision), 0) FROM audit_events")
	log "[$mode] killing the primary (-m immediate): $acked_before allocations acknowledged, feed head $head_before"
	kill_ms=$(now_ms)
	as_pg "$PGBIN/pg_ctl" -D "$dir/a" -m immediate -w stop >/dev/null
	as_pg "$PGBIN/pg_ctl" -D "$dir/b" -w promote >/dev/null
	promoted_ms=$(now_ms)
	PGPORT=$PGB
	log "[$mode] standby promoted $((promoted_ms - kill_ms)) ms after the kill"
	wait $lg || true
	wait $lg2 || true

	# Let the sequencer and the deliveries finish.
	local pending=x t0
	t0=$(date +%s)
	while [ $(($(date +%s) - t0)) -le "$DRAIN_WITHIN" ]; do
		pending=$(psql_q -c "SELECT (SELECT count(*) FROM audit_events WHERE revision IS NULL) + (SELECT count(*) FROM webhook_deliveries WHERE state = 'pending')")
		[ "$pending" = 0 ] && break
		sleep 0.5
	done
	[ "$pending" = 0 ] || violation "[$mode] $pending events or deliveries still waiting ${DRAIN_WITHIN}s after the load"

	local line
	line=$(cat "$dir/load-alloc.json")
	log "[$mode] allocation load: $line"
	check_loadgen "$line"
	line=$(cat "$dir/load-ingest.json")
	log "[$mode] ingestion load: $line"
	check_loadgen "$line"

	# Acknowledged = present (sync); what was lost (async).
	psql_q -c "CREATE TABLE acked (pool text, value text, owner_type text, owner_id text)" -c "\\copy acked FROM '$dir/acked.tsv'"
	local acked missing reissued
	acked=$(psql_q -c "SELECT count(*) FROM acked")
	missing=$(psql_q -c "SELECT count(*) FROM acked k WHERE NOT EXISTS (SELECT 1 FROM allocations a JOIN pools p ON p.id = a.pool_id
		WHERE p.name = k.pool AND a.value = k.value AND a.state = 'allocated' AND a.owner_type = k.owner_type AND a.owner_id = k.owner_id)")
	reissued=$(psql_q -c "SELECT count(*) FROM acked k JOIN pools p ON p.name = k.pool JOIN allocations a ON a.pool_id = p.id AND a.value = k.value
		WHERE a.owner_id IS DISTINCT FROM k.owner_id OR a.owner_type IS DISTINCT FROM k.owner_type")
	log "[$mode] acknowledged: $acked; missing on the new primary: $missing; values acknowledged to one owner and now held by another: $reissued"
	if [ "$mode" = sync ]; then
		[ "$missing" = 0 ] || violation "[$mode] $missing acknowledged allocations lost with synchronous replication"
		[ "$reissued" = 0 ] || violation "[$mode] $reissued acknowledged values now held by another owner"
	fi
	psql_q -c "DROP TABLE acked"
	check_unique
	for p in "${RELPOOLS[@]}"; do check_run_ends "$p"; done
	check_ingestion

	# The database's own check: revisions 1..N, counters, run ends, …
	local check_out=$dir/check.txt
	if "$BIN/ipledger" check --database "postgres://postgres@127.0.0.1:$PGB/ipledger?sslmode=disable" >"$check_out" 2>&1; then
		log "[$mode] ipledger check: $(tail -1 "$check_out")"
	else
		violation "[$mode] ipledger check on the new primary: $(grep -A3 FAIL "$check_out" | head -20)"
	fi
	local head events
	head=$(psql_q -c "SELECT COALESCE(MAX(revision), 0) FROM audit_events")
	events=$(psql_q -c "SELECT count(*) FROM audit_events")

	# Webhook deliveries: all delivered, each seen by the receiver, and
	# some of them for events after the failover.
	psql_q -c "CREATE TABLE sink (revision bigint, delivery_id text, event text, at_ms bigint)" -c "\\copy sink FROM '$dir/sink.tsv'"
	local undelivered unseen badsig after resumed_ms lostdel
	undelivered=$(psql_q -c "SELECT count(*) FROM webhook_deliveries WHERE state <> 'delivered'")
	unseen=$(psql_q -c "SELECT count(*) FROM webhook_deliveries d WHERE NOT EXISTS (SELECT 1 FROM sink s WHERE s.delivery_id = d.delivery_id)")
	badsig=$(psql_q -c "SELECT count(*) FROM sink WHERE event = 'badsig'")
	after=$(psql_q -c "SELECT count(*) FROM sink WHERE at_ms > $promoted_ms")
	resumed_ms=$(psql_q -c "SELECT COALESCE(MIN(at_ms), 0) - $promoted_ms FROM sink WHERE at_ms > $promoted_ms")
	lostdel=$(psql_q -c "SELECT count(DISTINCT s.delivery_id) FROM sink s WHERE NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.delivery_id = s.delivery_id)")
	log "[$mode] deliveries: $(psql_q -c 'SELECT count(*) FROM webhook_deliveries'); not delivered: $undelivered; never seen by the receiver: $unseen; bad signatures: $badsig"
	log "[$mode] received after the promotion: $after (first ${resumed_ms} ms after it); received for events the new primary does not have: $lostdel"
	[ "$undelivered" = 0 ] || violation "[$mode] $undelivered deliveries not delivered"
	[ "$unseen" = 0 ] || violation "[$mode] $unseen delivered deliveries the receiver never saw"
	[ "$badsig" = 0 ] || violation "[$mode] $badsig deliveries with a bad signature"
	[ "$after" -gt 0 ] || violation "[$mode] no webhook delivery after the failover: deliveries did not resume"
	if [ "$mode" = sync ]; then
		[ "$lostdel" = 0 ] || violation "[$mode] $lostdel deliveries of events that were lost"
	fi
	psql_q -c "DROP TABLE sink"

	local w n first last status
	w=$(window_503 "$kill_ms")
	read -r n first last <<<"$w"
	local span=0
	[ "$n" -gt 0 ] && span=$((last - first))
	log "[$mode] 503 answers after the kill: $n, from +$((first > 0 ? first - kill_ms : 0)) ms to +$((last > 0 ? last - kill_ms : 0)) ms (window $span ms)"
	status=$(grep -o '"status":5[0-9][0-9]' "$H7_TMP"/server-*.log | cut -d: -f3 | sort | uniq -c | tr -s ' ' | tr '\n' ';' || true)
	if grep -q '"status":500' "$H7_TMP"/server-*.log; then
		violation "[$mode] the servers answered 500: $status"
	fi
	for port in $P1 $P2; do
		kill -0 "$(server_pid $port)" 2>/dev/null || violation "[$mode] server :$port exited"
		curl -fsS -m 5 "http://127.0.0.1:$port/readyz" >/dev/null || violation "[$mode] server :$port not ready after the failover"
	done
	local ok
	ok=$(grep -o '"ok":[0-9]*' "$dir/load-alloc.json" | cut -d: -f2)
	RESULTS+=("| $mode | $ok | $acked | $missing | $reissued | $n | $span | $((promoted_ms - kill_ms)) | $head_before → $head ($events events) | $after (first +${resumed_ms} ms) | $lostdel |")

	server_stop $P1
	server_stop $P2
	kill "$sink" 2>/dev/null || true
	wait "$sink" 2>/dev/null || true
	stop_clusters
	CLUSTERS=()
}

log "building"
build
(cd "$ROOT" && go build -o "$BIN/hooksink" ./bench/hooksink)
[ -x "$PGBIN/pg_basebackup" ] || die "pg_basebackup not found in $PGBIN"
[ "$(id -u)" != 0 ] || { chown postgres "$H7_TMP" && chmod 755 "$H7_TMP"; }
for m in $MODES; do
	run_mode "$m"
done
echo
echo "| replication | allocations answered 2xx | acknowledged | acknowledged and missing | re-issued to another owner | 503 answers | 503 window (ms) | kill to promoted (ms) | feed head at kill → after | deliveries received after promotion | deliveries of lost events |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${RESULTS[@]}"
machine_info
log "violations: $VIOLATIONS"
[ "$VIOLATIONS" = 0 ] || die "$VIOLATIONS violations"
log "PASS"
