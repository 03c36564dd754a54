#!/usr/bin/env bash
# CPU per request of the REST ceiling (bench/baseline -mode ceiling) and of
# ipledger's automatic allocation (one pool at 1 and 8 clients, 100 pools
# at 8 clients), server and PostgreSQL apart, measured from /proc over the
# same loadgen runs, with a Go CPU profile of ipledger for each cell
# (docs/benchmarks.md "Where an allocation's time goes").
#
#   scripts/profile-cpu.sh                  # 5 s per cell
#   DURATION=8s CELLS="alloc,1 alloc,8" scripts/profile-cpu.sh
#
# Profiles go to $H7_TMP/cpu-CELL.pprof (kept with KEEP_TMP=1); read them
# with `go tool pprof -top`.
P1=${P1:-18491}
PGPORT=${PGPORT:-55491}
source "$(dirname "$0")/lib.sh"
DURATION=${DURATION:-5s}
CELLS=${CELLS:-"ceiling,1 ceiling,8 alloc,1 alloc,8 alloc100,8"}
PD=$((P1 + 100)) # ipledger's debug (pprof) listener
PB=$((P1 + 1))   # the baseline's port
secs=${DURATION%s}
tick=$(getconf CLK_TCK)
build
(cd "$ROOT" && go build -o "$BIN/baseline" ./bench/baseline)
pg_start

proc_cpu() { awk '{print $14+$15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
pg_cpu() {
	local pm s p
	pm=$(head -1 "$PGDATA_DIR/postmaster.pid")
	s=$(awk '{print $14+$15+$16+$17}' "/proc/$pm/stat")
	for p in $(pgrep -P "$pm" || true); do s=$((s + $(proc_cpu "$p"))); done
	echo "$s"
}
machine_cpu() { awk '/^cpu / {print $2+$3+$4+$6+$7+$8}' /proc/stat; }
# batches: the server's batch count, guess hits and misses, grouped batches.
batches() {
	curl -fsS "http://127.0.0.1:$P1/metrics" | awk '
		/^ipledger_allocation_batch_size_count/ {b=$2} /^ipledger_allocation_batch_guess_hits_total/ {h=$2}
		/^ipledger_allocation_batch_guess_misses_total/ {m=$2} /^ipledger_allocation_batch_grouped_total/ {g=$2}
		END {printf "%d %d %d %d\n", b, h, m, g}'
}

"$BIN/baseline" -mode ceiling -listen "127.0.0.1:$PB" -database "$DB_URL" >>"$H7_TMP/baseline.log" 2>&1 &
BPID=$!
SERVER_PIDS+=("$BPID")
server_start "$P1" --debug-listen "127.0.0.1:$PD"
SPID=$(server_pid "$P1")
until curl -fsS "http://127.0.0.1:$PB/readyz" >/dev/null 2>&1; do sleep 0.1; done
api POST /api/v1/pools '{"name":"bench","type":"ipv4","ranges":[{"first":"11.0.0.0","last":"11.255.255.255","auto_assign":true}]}' >/dev/null
for i in $(seq 0 99); do
	api POST /api/v1/pools "{\"name\":\"bench100-$i\",\"type\":\"integer\",\"ranges\":[{\"first\":\"0\",\"last\":\"9999999\",\"auto_assign\":true}]}" >/dev/null
done

echo "| cell | requests/s | p50 ms | server µs/req | PostgreSQL µs/req | machine µs/req | requests per batch | guess hits / misses | grouped batches |"
echo "|---|---|---|---|---|---|---|---|---|"
for cell in $CELLS; do
	what=${cell%,*} c=${cell#*,} url=http://127.0.0.1:$P1 pools=bench pid=$SPID
	case $what in
	ceiling) url=http://127.0.0.1:$PB pid=$BPID ;;
	alloc100) pools='bench100%100' ;;
	esac
	# warm-up
	"$BIN/loadgen" -mode allocate -servers "$url" -clients "$c" -duration 1s -pools "$pools" -label warm >/dev/null
	prof=
	if [ "$what" != ceiling ]; then
		curl -fsS -o "$H7_TMP/cpu-$what-$c.pprof" "http://127.0.0.1:$PD/debug/pprof/profile?seconds=$((secs - 1))" &
		prof=$!
	fi
	read -r b0 h0 m0 g0 < <(batches)
	s0=$(proc_cpu "$pid") p0=$(pg_cpu) t0=$(machine_cpu)
	line=$("$BIN/loadgen" -mode allocate -servers "$url" -clients "$c" -duration "$DURATION" -timeout 30s -pools "$pools" -label "$cell")
	s1=$(proc_cpu "$pid") p1=$(pg_cpu) t1=$(machine_cpu)
	read -r b1 h1 m1 g1 < <(batches)
	[ -z "$prof" ] || wait "$prof"
	echo "$line" >>"$H7_TMP/profile-cpu.jsonl"
	python3 - "$cell" "$line" "$tick" "$s0" "$s1" "$p0" "$p1" "$t0" "$t1" $((b1 - b0)) $((h1 - h0)) $((m1 - m0)) $((g1 - g0)) <<-'PY'
		import json, sys
		cell, d, tick = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
		s0, s1, p0, p1, t0, t1, b, h, m, g = map(int, sys.argv[4:14])
		n = max(d["ok"], 1)
		us = lambda a, b: (b - a) / tick * 1e6 / n
		per = "–" if cell.startswith("ceiling") else "%.1f" % (n / max(b, 1))
		hm = "–" if cell.startswith("ceiling") else "%d / %d" % (h, m)
		gr = "–" if cell.startswith("ceiling") else "%d" % g
		print("| %s | %.0f | %.2f | %.0f | %.0f | %.0f | %s | %s | %s |" % (cell, d["per_second"], d["p50_ms"], us(s0, s1), us(p0, p1), us(t0, t1), per, hm, gr))
	PY
done
echo
machine_info
