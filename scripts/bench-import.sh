#!/usr/bin/env bash
# Replace-all of a large NICo expected-machines file against a real
# `ipledger serve` process, on PostgreSQL (a throwaway cluster) and on
# SQLite: the time of each PUT /api/v1/expected-machines and the server's
# peak RSS (VmHWM) after them (docs/benchmarks.md "Imports").
#
#   scripts/bench-import.sh [RECORDS]     # default 60000 (≈ 10 MB)
#
# Three PUTs per database: the file into an empty site (every record
# created), a file whose reservations are shifted by one record (every
# record and DPU rewritten), and the same file again (nothing changes).
# Ports away from the other scripts' defaults, which other runs on a shared
# machine may hold.
P1=${P1:-18471}
PGPORT=${PGPORT:-55471}
source "$(dirname "$0")/lib.sh"
N=${1:-60000}
build
(cd "$ROOT" && go build -o "$BIN/emgen" ./bench/emgen)
"$BIN/emgen" -pools >"$H7_TMP/pools.toml"
"$BIN/emgen" -records "$N" -shift 0 >"$H7_TMP/em0.json"
"$BIN/emgen" -records "$N" -shift 1 >"$H7_TMP/em1.json"
size=$(stat -c %s "$H7_TMP/em0.json")
pg_start

cpu_ms() { # user+system CPU of the server process so far, in ms
	awk -v hz="$(getconf CLK_TCK)" '{print int(($14 + $15) * 1000 / hz)}' "/proc/$(server_pid "$P1")/stat"
}

put() { # label file
	local out c0
	c0=$(cpu_ms)
	out=$(curl -sS -o "$H7_TMP/put.out" -w '%{http_code} %{time_total}' -X PUT -H "Authorization: Bearer $ADMIN_TOKEN" \
		-H 'Content-Type: application/json' --data-binary "@$2" "http://127.0.0.1:$P1/api/v1/expected-machines")
	[ "${out%% *}" = 200 ] || die "$1: $out $(head -c 300 "$H7_TMP/put.out")"
	printf '| %s | %s | %s | %s |\n' "$DBNAME" "$1" "${out#* }" "$(($(cpu_ms) - c0))"
}

echo "## replace-all of $N records ($size bytes)"
machine_info
echo
echo "| database | PUT | seconds | server CPU ms |"
echo "|---|---|---|---|"
for DBNAME in postgres sqlite; do
	if [ "$DBNAME" = sqlite ]; then
		DB_URL="sqlite:$H7_TMP/import.db"
	fi
	server_start "$P1"
	curl -fsS -X POST -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/toml' \
		--data-binary "@$H7_TMP/pools.toml" "http://127.0.0.1:$P1/api/v1/pools:load" >/dev/null
	put "into an empty site" "$H7_TMP/em0.json"
	put "every reservation moved" "$H7_TMP/em1.json"
	put "the same file again" "$H7_TMP/em1.json"
	eval "HWM_$DBNAME=$(server_hwm_kb "$P1")"
	server_stop "$P1"
	SERVER_PIDS=()
done
echo
echo "Peak RSS of the server process (VmHWM): PostgreSQL $((HWM_postgres / 1024)) MiB, SQLite $((HWM_sqlite / 1024)) MiB."
