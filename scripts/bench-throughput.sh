#!/usr/bin/env bash
# Allocation throughput (docs/benchmarks.md "Allocation throughput"): automatic allocations per second through the REST API
# with 1, 8 and 32 concurrent clients against 1 and 2 `ipledger serve`
# processes sharing one PostgreSQL, from one pool and from 100 pools at
# once, next to the database's own ceiling measured in the same run:
# pgbench with one single-row INSERT per transaction at the same client
# counts.
#
#   scripts/bench-throughput.sh              # 20 s per cell
#   DURATION=5s CLIENTS="1 8" scripts/bench-throughput.sh
#
# Prints a markdown table; the raw JSON lines go to $OUT (default
# bench/results/throughput-<date>.jsonl). Runs its own PostgreSQL cluster
# on port $PGPORT (55432); never touches the machine's PostgreSQL.
source "$(dirname "$0")/lib.sh"

DURATION=${DURATION:-20s}
CLIENTS=${CLIENTS:-1 8 32}
SERVERS=${SERVERS:-1 2}
OUT=${OUT:-$ROOT/bench/results/throughput-$(date -u +%Y%m%dT%H%M).jsonl}
mkdir -p "$(dirname "$OUT")"
: >"$OUT"
secs=${DURATION%s}

log "building"
build
log "starting PostgreSQL on :$PGPORT in $H7_TMP"
pg_start

# --- the database's own ceiling: one single-row INSERT per transaction ---
psql_q -c "CREATE TABLE IF NOT EXISTS pgbench_single (id bigserial PRIMARY KEY, owner text NOT NULL, at timestamptz NOT NULL DEFAULT now())"
echo "INSERT INTO pgbench_single (owner) VALUES ('bench');" >"$H7_TMP/insert.sql"
declare -A PGB_TPS PGB_P99
for c in $CLIENTS; do
	rm -f "$H7_TMP"/pgbench_log.*
	j=$c
	[ "$j" -gt 4 ] && j=4
	tps=$(cd "$H7_TMP" && "$PGBIN/pgbench" -h 127.0.0.1 -p "$PGPORT" -U postgres -n -M prepared -c "$c" -j "$j" \
		-T "$secs" -l --log-prefix=pgbench_log -f "$H7_TMP/insert.sql" ipledger 2>/dev/null |
		awk '/^tps = / {print $3; exit}')
	p99=$(cat "$H7_TMP"/pgbench_log.* | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END {i=int(NR*0.99); if (i<1) i=1; printf "%.2f", a[i]/1000}')
	PGB_TPS[$c]=$tps
	PGB_P99[$c]=$p99
	printf '{"label":"pgbench single-row INSERT","clients":%s,"per_second":%s,"p99_ms":%s}\n' "$c" "$tps" "$p99" >>"$OUT"
	log "pgbench c=$c: $tps tps, p99 $p99 ms"
done
psql_q -c "DROP TABLE pgbench_single"

# --- ipledger: pools ---
API_PORT=$P1
server_start $P1
api POST /api/v1/pools '{"name":"bench","type":"ipv4","ranges":[{"first":"10.0.0.0","last":"10.255.255.255","auto_assign":true}]}' >/dev/null
for i in $(seq 0 99); do
	api POST /api/v1/pools "{\"name\":\"bench100-$i\",\"type\":\"ipv4\",\"ranges\":[{\"first\":\"10.$i.0.0\",\"last\":\"10.$i.255.255\",\"auto_assign\":true}]}" >/dev/null
done

run_load() { # label servers clients pools
	local label=$1 urls=$2 c=$3 pools=$4 line
	line=$("$BIN/loadgen" -mode allocate -servers "$urls" -clients "$c" -duration "$DURATION" -pools "$pools" -label "$label" -timeout 30s) ||
		die "loadgen $label c=$c reported violations: $line"
	echo "$line" >>"$OUT"
	echo "$line"
}

declare -A R
for n in $SERVERS; do
	urls=http://127.0.0.1:$P1
	if [ "$n" = 2 ]; then
		[ -n "$(server_pid $P2)" ] || server_start $P2
		urls=$urls,http://127.0.0.1:$P2
	fi
	for c in $CLIENTS; do
		for kind in one hundred; do
			pools=bench
			[ $kind = hundred ] && pools='bench100%100'
			line=$(run_load "$kind pool(s), $n server(s)" "$urls" "$c" "$pools")
			R[$kind,$n,$c]=$(echo "$line" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.0f %.1f %.1f" % (d["per_second"], d["p50_ms"], d["p99_ms"]))')
			log "$kind pool(s), $n server(s), c=$c: ${R[$kind,$n,$c]} (per_second p50 p99)"
		done
	done
done

total=$(psql_q -c "SELECT count(*) FROM allocations")
dups=$(psql_q -c "SELECT count(*) FROM (SELECT pool_id, value_key FROM allocations GROUP BY 1,2 HAVING count(*) > 1) d")
[ "$dups" = 0 ] || die "$dups values are held twice"

echo
machine_info
echo "- duration per cell: $DURATION; allocations made in the run: $total; values held twice: $dups"
echo
echo "| clients | pgbench INSERT/s (p99 ms) | servers | 1 pool: alloc/s | p50 ms | p99 ms | % of pgbench | 100 pools: alloc/s | p50 ms | p99 ms | % of pgbench |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for c in $CLIENTS; do
	for n in $SERVERS; do
		read -r a1 a50 a99 <<<"${R[one,$n,$c]}"
		read -r h1 h50 h99 <<<"${R[hundred,$n,$c]}"
		pct1=$(python3 -c "print('%.0f %%' % (100*$a1/${PGB_TPS[$c]}))")
		pcth=$(python3 -c "print('%.0f %%' % (100*$h1/${PGB_TPS[$c]}))")
		printf '| %s | %.0f (%s) | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$c" "${PGB_TPS[$c]}" "${PGB_P99[$c]}" "$n" \
			"$a1" "$a50" "$a99" "$pct1" "$h1" "$h50" "$h99" "$pcth"
	done
done
echo
echo "raw results: ${OUT#"$ROOT"/}"
