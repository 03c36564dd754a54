#!/usr/bin/env bash
# Large pools and memory (docs/benchmarks.md "Large pools" and "Memory"):
# an IPv6 /64 pool and an IPv4 /8 pool grow from
# empty to 1M allocations each; at 0, 10k, 100k and 1M existing
# allocations it measures the cost of an automatic allocation through the
# REST API (1 client: latency; 8 clients: throughput) and the server's RSS;
# at 1M it measures the p99 latency of the pool page of the console and of
# the allocations API (first page, a deep page, the state and owner
# filters), then walks every page of both pools and reads the server's RSS
# and peak RSS.
#
#   scripts/bench-large.sh                   # up to 1M per pool
#   LEVELS="0 10000" READ_FOR=3s scripts/bench-large.sh   # quick check
#
# Allocations between levels are bulk-inserted with SQL in exactly the rows
# the allocator writes (contiguous from the bottom of the range, run_end
# flags right, one allocation.create audit event each spread over the last
# 30 days, per-range counts and usage roll-up recomputed), because making 2M allocations through the API would take an
# hour here; each level's measured allocations go through the API. After a
# bulk insert the script runs VACUUM ANALYZE, as autovacuum would on a live
# site. Runs its own PostgreSQL on $PGPORT.
source "$(dirname "$0")/lib.sh"

LEVELS=${LEVELS:-0 10000 100000 1000000}
ALLOC_REQS=${ALLOC_REQS:-1000}
READ_FOR=${READ_FOR:-10s}
READ_CLIENTS=${READ_CLIENTS:-2}
OUT=${OUT:-$ROOT/bench/results/large-$(date -u +%Y%m%dT%H%M).jsonl}
mkdir -p "$(dirname "$OUT")"
: >"$OUT"

log "building"
build
log "starting PostgreSQL on :$PGPORT in $H7_TMP"
pg_start
API_PORT=$P1
server_start $P1
S=http://127.0.0.1:$P1
api POST /api/v1/pools '{"name":"big6","type":"ipv6","ranges":[{"first":"fd00:64::","last":"fd00:64::ffff:ffff:ffff:ffff","auto_assign":true}]}' >/dev/null
api POST /api/v1/pools '{"name":"big4","type":"ipv4","ranges":[{"first":"10.0.0.0","last":"10.255.255.255","auto_assign":true}]}' >/dev/null

# seed POOL N: bulk-insert N allocations right after the pool's current
# contiguous block (what N more automatic allocations would have written).
seed() {
	local pool=$1 n=$2 keyexpr valexpr
	case $pool in
	big4)
		keyexpr="lpad(to_hex(167772160 + i), 32, '0')"
		valexpr="host('10.0.0.0'::inet + i)"
		;;
	big6)
		keyexpr="'fd00006400000000' || lpad(to_hex(i), 16, '0')"
		valexpr="host('fd00:64::'::inet + i)"
		;;
	esac
	psql_q <<-SQL
		BEGIN;
		-- Bulk load: row triggers off for this transaction (replica role),
		-- the per-range counts and the usage roll-up are recomputed below
		-- exactly as migration 6 computes them.
		SET LOCAL session_replication_role = replica;
		SELECT id FROM pools WHERE name = '$pool' FOR UPDATE;
		CREATE TEMP TABLE s ON COMMIT DROP AS
		  SELECT (SELECT id FROM pools WHERE name = '$pool') AS pool_id, (SELECT count(*) FROM allocations a JOIN pools p ON p.id = a.pool_id WHERE p.name = '$pool') AS c;
		UPDATE allocations SET run_end = false WHERE pool_id = (SELECT pool_id FROM s)
		  AND value_key = (SELECT max(value_key) FROM allocations WHERE pool_id = (SELECT pool_id FROM s));
		INSERT INTO allocations (pool_id, value_key, value, state, owner_type, owner_id, run_end, allocated_at)
		  SELECT s.pool_id, $keyexpr, $valexpr, 'allocated', 'seed', 'seed-' || i, i = s.c + $n - 1, now()
		  FROM s, generate_series(s.c, s.c + $n - 1) AS i;
		INSERT INTO audit_events (at, actor, action, object_type, object_id, request_id, after_json)
		  SELECT now() - (i % 30) * interval '1 day', 'bench:seed', 'allocation.create', 'allocation', '$pool/' || $valexpr, '',
		         '{"pool":"$pool","owner_type":"seed","state":"allocated"}'
		  FROM s, generate_series(s.c, s.c + $n - 1) AS i;
		UPDATE range_counts c SET
		  allocated = (SELECT COUNT(*) FROM allocations a WHERE a.pool_id = r.pool_id AND a.value_key BETWEEN r.first_key AND r.last_key AND a.state = 'allocated'),
		  quarantined = (SELECT COUNT(*) FROM allocations a WHERE a.pool_id = r.pool_id AND a.value_key BETWEEN r.first_key AND r.last_key AND a.state = 'quarantined')
		  FROM pool_ranges r WHERE r.id = c.range_id AND r.pool_id = (SELECT pool_id FROM s);
		DELETE FROM pool_usage_days WHERE pool = '$pool';
		INSERT INTO pool_usage_days (pool, day, action, n)
		  SELECT split_part(object_id, '/', 1), to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), action, COUNT(*)
		  FROM audit_events WHERE object_type = 'allocation' AND object_id LIKE '$pool/%' GROUP BY 1, 2, 3;
		COMMIT;
	SQL
}

count() { psql_q -c "SELECT count(*) FROM allocations a JOIN pools p ON p.id = a.pool_id WHERE p.name = '$1'"; }

field() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(d['$2'])" "$1"; }

declare -A ROW
have=0
for level in $LEVELS; do
	add=$((level - have))
	if [ $add -gt 0 ]; then
		for pool in big4 big6; do
			cur=$(count $pool)
			need=$((level - cur))
			[ $need -gt 0 ] || continue
			log "bulk-inserting $need allocations into $pool (now $cur)"
			seed $pool $need
		done
		psql_q -c "VACUUM ANALYZE allocations" -c "VACUUM ANALYZE audit_events"
	fi
	have=$level
	for pool in big4 big6; do
		n=$(count $pool)
		l1=$("$BIN/loadgen" -mode allocate -servers $S -clients 1 -requests "$ALLOC_REQS" -duration 0 -pools $pool -label "$pool at $n: 1 client")
		l8=$("$BIN/loadgen" -mode allocate -servers $S -clients 8 -duration 5s -pools $pool -label "$pool at $n: 8 clients")
		echo "$l1" >>"$OUT"
		echo "$l8" >>"$OUT"
		rss=$(server_rss_kb $P1)
		ROW[$pool,$level]="$n|$(field "$l1" p50_ms)|$(field "$l1" p99_ms)|$(printf '%.0f' "$(field "$l8" per_second)")|$(field "$l8" p99_ms)|$((rss / 1024))"
		log "$pool with $n allocations: 1 client p50 $(field "$l1" p50_ms) ms p99 $(field "$l1" p99_ms) ms; 8 clients $(field "$l8" per_second)/s p99 $(field "$l8" p99_ms) ms; RSS $((rss / 1024)) MiB"
	done
done

# --- reads at the top level ---
cookie=$(curl -s -o /dev/null -D - -X POST --data-urlencode "token=$ADMIN_TOKEN" "$S/login" | awk -F'[ ;]' 'tolower($1) == "set-cookie:" {print $2}')
[ -n "$cookie" ] || die "console login failed"
deep4=$(psql_q -c "SELECT value_key FROM allocations a JOIN pools p ON p.id = a.pool_id WHERE p.name = 'big4' ORDER BY value_key OFFSET (SELECT count(*)/2 FROM allocations a JOIN pools p ON p.id = a.pool_id WHERE p.name = 'big4') LIMIT 1")
deep6=$(psql_q -c "SELECT value_key FROM allocations a JOIN pools p ON p.id = a.pool_id WHERE p.name = 'big6' ORDER BY value_key OFFSET (SELECT count(*)/2 FROM allocations a JOIN pools p ON p.id = a.pool_id WHERE p.name = 'big6') LIMIT 1")
reads=(
	"API GET pool (stats)|/api/v1/pools/big4|"
	"API GET pool (stats), IPv6|/api/v1/pools/big6|"
	"API allocations, first page|/api/v1/pools/big4/allocations|"
	"API allocations, page in the middle|/api/v1/pools/big4/allocations?cursor=$deep4|"
	"API allocations, IPv6 page in the middle|/api/v1/pools/big6/allocations?cursor=$deep6|"
	"API allocations, limit=1000|/api/v1/pools/big4/allocations?limit=1000&cursor=$deep4|"
	"API allocations, state=quarantined|/api/v1/pools/big4/allocations?state=quarantined|"
	"API allocations, owner filter|/api/v1/pools/big4/allocations?owner_type=seed&owner_id=seed-500000|"
	"API list pools|/api/v1/pools|"
	"console pool page|/pools/big4|cookie"
	"console pool page, IPv6|/pools/big6|cookie"
	"console pool page, middle of the allocations|/pools/big4?cursor=$deep4|cookie"
)
READS=()
for r in "${reads[@]}"; do
	IFS='|' read -r label path auth <<<"$r"
	args=()
	[ "$auth" = cookie ] && args=(-cookie "$cookie" -token "")
	line=$("$BIN/loadgen" -mode get -servers $S -clients "$READ_CLIENTS" -duration "$READ_FOR" -paths "$path" -label "$label" "${args[@]}") ||
		die "$label: $line"
	echo "$line" >>"$OUT"
	READS+=("| $label | \`${path%%cursor=*}$([[ $path == *cursor=* ]] && echo 'cursor=…')\` | $(field "$line" requests) | $(field "$line" p50_ms) | $(field "$line" p99_ms) |")
	log "$label: p50 $(field "$line" p50_ms) ms, p99 $(field "$line" p99_ms) ms"
done

rss_before_walk=$(server_rss_kb $P1)
walk=$("$BIN/loadgen" -mode walk -servers $S -clients 2 -pools big4,big6 -limit 1000 -duration 600s -label "full page walk")
echo "$walk" >>"$OUT"
rss_after=$(server_rss_kb $P1)
hwm=$(server_hwm_kb $P1)
log "walk: $walk"
log "RSS before walk $((rss_before_walk / 1024)) MiB, after $((rss_after / 1024)) MiB, peak $((hwm / 1024)) MiB"

echo
machine_info
echo
echo "Allocation cost as the pools fill (automatic allocation through the REST API; 1 client: $ALLOC_REQS requests; 8 clients: 5 s):"
echo
echo "| pool | allocations | 1 client p50 ms | 1 client p99 ms | 8 clients alloc/s | 8 clients p99 ms | server RSS MiB |"
echo "|---|---|---|---|---|---|---|"
for pool in big6 big4; do
	for level in $LEVELS; do
		IFS='|' read -r n p50 p99 t8 p99_8 rss <<<"${ROW[$pool,$level]}"
		name="IPv6 /64"
		[ $pool = big4 ] && name="IPv4 /8"
		echo "| $name | $n | $p50 | $p99 | $t8 | $p99_8 | $rss |"
	done
done
echo
echo "Reads with $(count big4) allocations in the IPv4 pool and $(count big6) in the IPv6 pool ($READ_CLIENTS clients, $READ_FOR each):"
echo
echo "| what | path | requests | p50 ms | p99 ms |"
echo "|---|---|---|---|---|"
printf '%s\n' "${READS[@]}"
echo
echo "Full page walk (limit=1000, both pools, 2 walkers): $(field "$walk" pages_walked) pages, $(field "$walk" items_walked) items in $(printf '%.1f' "$(field "$walk" seconds)") s, page p99 $(field "$walk" p99_ms) ms."
echo "Server RSS: $((rss_before_walk / 1024)) MiB before the walk, $((rss_after / 1024)) MiB after, peak (VmHWM) over the whole run $((hwm / 1024)) MiB."
echo
echo "raw results: ${OUT#"$ROOT"/}"
