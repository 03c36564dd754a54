#!/usr/bin/env bash
# A/B of automatic allocation between two commits on a shared machine:
# builds `ipledger` at $A (default main) and at the work tree, then runs
# each cell $ROUNDS times alternating A and B (a fresh database each turn,
# one PostgreSQL), each cell followed by the REST ceiling (bench/baseline
# -mode ceiling) at the same clients, and prints per-round rates and the
# median ratios B/A, A/ceiling and B/ceiling (docs/benchmarks.md "Where an allocation's time goes").
#
#   scripts/bench-ab.sh                          # A=main, 3 rounds, 4 s cells
#   A=HEAD~1 ROUNDS=5 CELLS="alloc,1" scripts/bench-ab.sh
P1=${P1:-18571}
P2=${P2:-18572}
PGPORT=${PGPORT:-55571}
source "$(dirname "$0")/lib.sh"
A=${A:-main}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-4s}
CELLS=${CELLS:-"alloc,1 alloc,8 alloc100,8 alloc2srv,8"}
PB=$((P1 + 2))
OUT=${OUT:-$H7_TMP/ab.jsonl}
build
mkdir -p "$H7_TMP/srcA"
(cd "$ROOT" && git archive "$A" | tar -x -C "$H7_TMP/srcA")
(cd "$H7_TMP/srcA" && go build -o "$BIN/ipledger-A" ./cmd/ipledger)
cp "$BIN/ipledger" "$BIN/ipledger-B"
(cd "$ROOT" && go build -o "$BIN/baseline" ./bench/baseline)
pg_start
PGDB=postgres psql_q -c "CREATE DATABASE ceiling" >/dev/null
"$BIN/baseline" -mode ceiling -listen "127.0.0.1:$PB" -database "${DB_URL/\/ipledger?//ceiling?}" >>"$H7_TMP/baseline.log" 2>&1 &
SERVER_PIDS+=("$!")
until curl -fsS "http://127.0.0.1:$PB/readyz" >/dev/null 2>&1; do sleep 0.1; done

run() { # label url clients pools
	local line
	line=$("$BIN/loadgen" -mode allocate -servers "$2" -clients "$3" -duration "$DURATION" -timeout 30s -pools "$4" -label "$1") ||
		die "loadgen $1: $line"
	echo "$line" >>"$OUT"
	echo "$line" | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["per_second"]))'
}
declare -A R
for round in $(seq 1 "$ROUNDS"); do
	for v in A B; do
		cp "$BIN/ipledger-$v" "$BIN/ipledger"
		reset_db >/dev/null
		server_start "$P1"
		server_start "$P2"
		api POST /api/v1/pools '{"name":"bench","type":"ipv4","ranges":[{"first":"11.0.0.0","last":"11.255.255.255","auto_assign":true}]}' >/dev/null
		for i in $(seq 0 99); do
			api POST /api/v1/pools "{\"name\":\"bench100-$i\",\"type\":\"integer\",\"ranges\":[{\"first\":\"0\",\"last\":\"9999999\",\"auto_assign\":true}]}" >/dev/null
		done
		for cell in $CELLS; do
			what=${cell%,*} c=${cell#*,} url=http://127.0.0.1:$P1 pools=bench
			case $what in
			alloc100) pools='bench100%100' ;;
			alloc2srv) url=$url,http://127.0.0.1:$P2 ;;
			esac
			R[$v,$cell,$round]=$(run "$v,$cell,$round" "$url" "$c" "$pools")
			R[ceil$v,$cell,$round]=$(run "ceiling,$c,$v,$round" "http://127.0.0.1:$PB" "$c" bench)
			log "round $round $v $cell: ${R[$v,$cell,$round]}/s (ceiling ${R[ceil$v,$cell,$round]}/s)"
		done
		server_stop "$P1"
		server_stop "$P2"
	done
done
dups=$(psql_q -c "SELECT count(*) FROM (SELECT pool_id, value_key FROM allocations GROUP BY 1,2 HAVING count(*) > 1) d")
[ "$dups" = 0 ] || die "$dups values are held twice"
echo
machine_info
echo "- A = $A ($(cd "$ROOT" && git rev-parse --short "$A")), B = the work tree; $ROUNDS rounds of $DURATION cells, A and B alternating"
echo
echo "| cell | A/s by round (its ceiling) | B/s by round (its ceiling) | median B/A | median A/ceiling | median B/ceiling |"
echo "|---|---|---|---|---|---|"
for cell in $CELLS; do
	a= b= ka= kb=
	for round in $(seq 1 "$ROUNDS"); do
		a="$a ${R[A,$cell,$round]}" b="$b ${R[B,$cell,$round]}" ka="$ka ${R[ceilA,$cell,$round]}" kb="$kb ${R[ceilB,$cell,$round]}"
	done
	python3 - "$cell" "$a" "$b" "$ka" "$kb" <<-'PY'
		import statistics as st, sys
		cell, a, b, ka, kb = sys.argv[1], *[list(map(float, x.split())) for x in sys.argv[2:6]]
		m = lambda xs: "%.2f" % st.median(xs)
		f = lambda xs, ks: " ".join("%.0f (%.0f)" % (x, k) for x, k in zip(xs, ks))
		print("| %s | %s | %s | %s | %s | %s |" % (cell, f(a, ka), f(b, kb), m([y / x for x, y in zip(a, b)]),
		      m([x / k for x, k in zip(a, ka)]), m([y / k for y, k in zip(b, kb)])))
	PY
done
