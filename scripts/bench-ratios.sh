#!/usr/bin/env bash
# Every throughput figure of docs/benchmarks.md "Ratios to the REST
# ceiling" in one run, as ratios to the REST ceiling measured in the same
# run on the same PostgreSQL, driven by the same load generator
# (bench/loadgen), so that the noise of a shared machine cancels:
#
#   - the REST ceiling (bench/baseline -mode ceiling: bearer token, JSON
#     body, one single-row INSERT per request, 201 JSON), measured first
#     and last, the mean used;
#   - ipledger automatic allocation: one pool at 1 and 8 clients, 100
#     pools at 8 clients, two servers on one pool at 8 clients;
#   - the NetBox-style allocator (one global lock, scan for the lowest
#     free value) and the NICo-style one (a row per value, 250,000 rows, a
#     random free row FOR UPDATE SKIP LOCKED) at 1 and 8 clients;
#   - ipledger site-explorer reports of hosts with 2 DPUs at 1, 8 and 32
#     clients, without reservations and with reservations on every DPU.
#
#   scripts/bench-ratios.sh                 # 5 s per cell
#   DURATION=10s scripts/bench-ratios.sh
#   ONLY=alloc scripts/bench-ratios.sh      # the ceiling and allocation cells only
#
# Prints one markdown table; raw JSON lines go to $OUT. Runs its own
# PostgreSQL cluster; never touches the machine's PostgreSQL.
P1=${P1:-18481}
P2=${P2:-18482}
PGPORT=${PGPORT:-55481}
source "$(dirname "$0")/lib.sh"
DURATION=${DURATION:-5s}
ONLY=${ONLY:-} # empty: every cell; alloc: the ceiling and ipledger allocation
case "$ONLY" in '' | alloc) ;; *) die "ONLY=$ONLY: want alloc or nothing" ;; esac
OUT=${OUT:-$H7_TMP/ratios.jsonl}
PB=18483 # baseline servers' port
: >"$OUT"

build
(cd "$ROOT" && go build -o "$BIN/baseline" ./bench/baseline && go build -o "$BIN/emgen" ./bench/emgen)
pg_start

baseline_start() { # mode
	"$BIN/baseline" -mode "$1" -listen "127.0.0.1:$PB" -database "$DB_URL" >>"$H7_TMP/baseline-$1.log" 2>&1 &
	BASE_PID=$!
	SERVER_PIDS+=("$BASE_PID")
	for _ in $(seq 1 600); do
		curl -fsS "http://127.0.0.1:$PB/readyz" >/dev/null 2>&1 && return 0
		kill -0 "$BASE_PID" 2>/dev/null || die "baseline $1 exited; see $H7_TMP/baseline-$1.log"
		sleep 0.1
	done
	die "baseline $1 not ready"
}
baseline_stop() { kill -TERM "$BASE_PID" 2>/dev/null || true; wait "$BASE_PID" 2>/dev/null || true; }

declare -A RATE P50
cell() { # key url mode clients [loadgen args…]
	local key=$1 url=$2 mode=$3 c=$4 line
	shift 4
	line=$("$BIN/loadgen" -mode "$mode" -servers "$url" -clients "$c" -duration "$DURATION" -timeout 30s -label "$key" "$@") ||
		die "loadgen $key reported violations: $line"
	echo "$line" >>"$OUT"
	read -r RATE[$key] P50[$key] < <(echo "$line" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.0f %.1f" % (d["per_second"], d["p50_ms"]))')
	log "$key: ${RATE[$key]}/s p50 ${P50[$key]} ms"
}

ceiling() { # suffix
	baseline_start ceiling
	for c in 1 8; do cell "ceiling$1,$c" "http://127.0.0.1:$PB" allocate "$c" -pools bench; done
	baseline_stop
}

ceiling a

if [ -z "$ONLY" ]; then
	for m in netbox nico; do
		baseline_start "$m"
		for c in 1 8; do cell "$m,$c" "http://127.0.0.1:$PB" allocate "$c" -pools bench; done
		baseline_stop
	done
fi

# feed_settle waits (at most 20 s) until the feed has numbered every event
# written so far, so that a cell does not pay for the cells before it.
feed_settle() {
	for _ in $(seq 1 100); do
		[ "$(psql_q -c "SELECT count(*) FROM audit_events WHERE revision IS NULL")" = 0 ] && return 0
		sleep 0.2
	done
}

ingest_cells() {
	"$BIN/emgen" -ingest-run x -pools >"$H7_TMP/ingest-pools.toml"
	curl -fsS -X POST -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/toml' \
		--data-binary "@$H7_TMP/ingest-pools.toml" "$U1/api/v1/pools:load" >/dev/null
	offset=0
	feed_settle
	for c in 1 8 32; do
		cell "ingest,$c" "$U1" ingest "$c" -run "plain$c"
		# Every DPU a report of this run names is declared first, with both
		# loopbacks reserved (more reports per client than a cell can make).
		per=$((6000 / c))
		"$BIN/emgen" -ingest-run "resv$c" -clients "$c" -per "$per" -offset "$offset" >"$H7_TMP/resv.json"
		offset=$((offset + c * per * 2))
		curl -fsS -o /dev/null -X PUT -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' \
			--data-binary "@$H7_TMP/resv.json" "$U1/api/v1/expected-machines"
		# The declaration is done before the bring-up starts: let the feed
		# number its events first, so the cell measures reports alone.
		feed_settle
		cell "ingestresv,$c" "$U1" ingest "$c" -run "resv$c"
	done
	reserved=$(psql_q -c "SELECT count(*) FROM network_configs n JOIN expected_dpus d ON d.loopback_ip = n.loopback_ip")
}

server_start "$P1"
server_start "$P2"
U1=http://127.0.0.1:$P1
api POST /api/v1/pools '{"name":"bench","type":"ipv4","ranges":[{"first":"11.0.0.0","last":"11.255.255.255","auto_assign":true}]}' >/dev/null
for i in $(seq 0 99); do
	api POST /api/v1/pools "{\"name\":\"bench100-$i\",\"type\":\"integer\",\"ranges\":[{\"first\":\"0\",\"last\":\"9999999\",\"auto_assign\":true}]}" >/dev/null
done
for c in 1 8; do cell "alloc,$c" "$U1" allocate "$c" -pools bench; done
cell "alloc100,8" "$U1" allocate 8 -pools 'bench100%100'
cell "alloc2srv,8" "$U1,http://127.0.0.1:$P2" allocate 8 -pools bench

reserved=-
[ -n "$ONLY" ] || ingest_cells
server_stop "$P1"
server_stop "$P2"

ceiling b

dups=$(psql_q -c "SELECT count(*) FROM (SELECT pool_id, value_key FROM allocations GROUP BY 1,2 HAVING count(*) > 1) d")
[ "$dups" = 0 ] || die "$dups values are held twice"

ceil() { python3 -c "print(round(((${RATE[ceilinga,$1]}) + (${RATE[ceilingb,$1]})) / 2))"; }
C1=$(ceil 1)
C8=$(ceil 8)
row() { # label key clients
	local r=${RATE[$2]} base=$C1
	[ "$3" = 1 ] || base=$C8
	printf '| %s | %s | %s | %s | %s |\n' "$1" "$3" "$r" "${P50[$2]}" "$(python3 -c "print('%.2f' % ($r / $base))")"
}
echo
machine_info
echo "- $DURATION per cell; REST ceiling first and last: 1 client ${RATE[ceilinga,1]} and ${RATE[ceilingb,1]}/s, 8 clients ${RATE[ceilinga,8]} and ${RATE[ceilingb,8]}/s (mean used); values held twice: $dups; DPUs holding their reserved IPv4 loopback: $reserved"
echo
echo "| work | clients | requests/s | p50 ms | ratio to the REST ceiling (same clients) |"
echo "|---|---|---|---|---|"
printf '| REST ceiling (mean) | 1 | %s | %s | 1.00 |\n' "$C1" "${P50[ceilinga,1]}"
printf '| REST ceiling (mean) | 8 | %s | %s | 1.00 |\n' "$C8" "${P50[ceilinga,8]}"
row "ipledger allocation, one pool" alloc,1 1
row "ipledger allocation, one pool" alloc,8 8
row "ipledger allocation, 100 pools" alloc100,8 8
row "ipledger allocation, one pool, two servers" alloc2srv,8 8
[ -n "$ONLY" ] && exit 0
row "NetBox-style (global lock, scan)" netbox,1 1
row "NetBox-style (global lock, scan)" netbox,8 8
row "NICo-style (row per value, SKIP LOCKED)" nico,1 1
row "NICo-style (row per value, SKIP LOCKED)" nico,8 8
for c in 1 8 32; do
	row "ipledger report, host + 2 DPUs" "ingest,$c" "$c"
	row "ipledger report, host + 2 DPUs, every DPU reserved" "ingestresv,$c" "$c"
done
python3 - "${RATE[ingest,1]}" "${RATE[ingest,8]}" "${RATE[ingest,32]}" "${RATE[ingestresv,8]}" <<'PY'
import sys
r1, r8, r32, rr8 = map(float, sys.argv[1:])
print(f"\nReports: 8 clients = {r8 / r1:.1f}× one client, 32 clients = {r32 / r1:.1f}×; with every DPU reserved, 8 clients = {rr8 / r8:.2f} of the rate without.")
PY
