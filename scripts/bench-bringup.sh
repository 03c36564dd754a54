#!/usr/bin/env bash
# A site bring-up through site-explorer reports, end to end against one
# `ipledger serve` (docs/benchmarks.md "Site bring-up"):
#
#   1. bring-up: HOSTS ExpectedMachines, each DPU (2 per host) with both
#      loopbacks reserved, declared in one PUT /api/v1/expected-machines
#      (timed on its own), then exactly those HOSTS reports from CLIENTS
#      clients (timed end to end); afterwards SQL checks that every DPU
#      holds exactly its reserved IPv4 and IPv6 loopback, that no value is
#      held twice, and that repeating SAMPLE of the reports changes no row;
#   2. growth: more reports of new hosts without reservations (automatic
#      loopbacks) until the site holds MACHINES machines (hosts + DPUs).
#
# Both phases are cut into slices of SLICE machines (one loadgen run per
# phase, bench/loadgen -slice): the table gives reports/s, p50 and p99 per
# slice against the machines the site held when the slice began, and the
# ratio of the last slice's rate to the first shows whether the cost of a
# report stays flat as the site fills.
#
#   scripts/bench-bringup.sh                                # 10,000 hosts, growth to 100,000 machines
#   HOSTS=500 MACHINES=5000 SLICE=1000 scripts/bench-bringup.sh   # quick check
#   DB=sqlite scripts/bench-bringup.sh                      # the embedded default database
#
# Prints a markdown summary (also written to $TXT); raw JSON lines (every
# slice, every loadgen summary, one line of the run's checks) go to $OUT.
# Runs its own PostgreSQL cluster on its own port; never touches the
# machine's PostgreSQL.
P1=${P1:-18781}
PGPORT=${PGPORT:-55781}
source "$(dirname "$0")/lib.sh"
HOSTS=${HOSTS:-10000}
MACHINES=${MACHINES:-100000}
CLIENTS=${CLIENTS:-8}
SLICE=${SLICE:-10000}
SAMPLE=${SAMPLE:-200}
DB=${DB:-postgres}
DPUS=2
case "$DB" in postgres | sqlite) ;; *) die "DB=$DB: want postgres or sqlite" ;; esac
[ "$HOSTS" -ge "$CLIENTS" ] && [ "$SAMPLE" -le "$HOSTS" ] || die "want CLIENTS ≤ HOSTS and SAMPLE ≤ HOSTS"
name=bringup-$(date -u +%Y%m%d)
[ "$DB" = postgres ] || name+=-$DB
[ "$HOSTS/$MACHINES" = 10000/100000 ] || name+=-${HOSTS}h-${MACHINES}m
OUT=${OUT:-$ROOT/bench/results/$name.jsonl}
TXT=${TXT:-${OUT%.jsonl}.txt}
: >"$OUT"
U1=http://127.0.0.1:$P1
PER_HOST=$((1 + DPUS))                             # machines a report of a new host adds
SLICE_REPORTS=$(((SLICE + PER_HOST - 1) / PER_HOST)) # reports per slice
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)

build
(cd "$ROOT" && go build -o "$BIN/emgen" ./bench/emgen)
if [ "$DB" = sqlite ]; then
	SQLITE_FILE=$H7_TMP/bringup.db
	DB_URL="sqlite:$SQLITE_FILE"
	sql() { sqlite3 -batch -noheader "$SQLITE_FILE" "$1"; }
else
	pg_start
	sql() { psql_q -c "$1"; }
fi
INFO=$(machine_info)
[ "$DB" = postgres ] || INFO=$(grep -v '^- PostgreSQL' <<<"$INFO"; echo "- database: SQLite, one file on $(df -T "$H7_TMP" | awk 'NR==2 {print $2}')")
server_start "$P1"
"$BIN/emgen" -ingest-run x -pools >"$H7_TMP/pools.toml"
curl -fsS -o /dev/null -X POST -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/toml' \
	--data-binary "@$H7_TMP/pools.toml" "$U1/api/v1/pools:load"

cpu_ms() { # user+system CPU of the server process so far, in ms
	awk -v hz="$(getconf CLK_TCK)" '{print int(($14 + $15) * 1000 / hz)}' "/proc/$(server_pid "$P1")/stat"
}

# ingest LABEL [loadgen args…]: one loadgen ingest run from CLIENTS clients,
# measuring the CPU time of the server and of PostgreSQL (postmaster and
# backends); every line it prints goes to $OUT, its summary line to $LAST.
ingest() {
	local label=$1 rc=0 cpu
	shift
	cpu=server=$(server_pid "$P1")
	[ "$DB" = sqlite ] || cpu+=,postgres=$(head -1 "$PGDATA_DIR/postmaster.pid")
	"$BIN/loadgen" -mode ingest -servers "$U1" -clients "$CLIENTS" -dpus "$DPUS" -timeout 30s -want-complete \
		-cpu "$cpu" -label "$label" "$@" >"$H7_TMP/$label.out" || rc=$?
	cat "$H7_TMP/$label.out" >>"$OUT"
	LAST=$(tail -1 "$H7_TMP/$label.out")
	[ $rc = 0 ] || die "loadgen $label: $LAST"
}

# field JSON KEY…: the keys' values of one JSON line, space-separated.
field() { python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(*(d[k] for k in sys.argv[2:]))' "$@"; }

# seq_scans LABEL: on PostgreSQL, appends to $OUT a line of the rows each
# table's sequential scans have read so far (pg_stat_user_tables), after
# waiting for idle backends to flush their counters (every 10 s at most).
# A look-up that scans a table instead of using an index shows up there,
# per report, whatever the machine's load.
seq_scans() {
	[ "$DB" = postgres ] || return 0
	sleep 11
	sql "SELECT json_build_object('label', '$1', 'seq_tup_read', json_object_agg(relname, seq_tup_read), 'seq_scan', json_object_agg(relname, seq_scan)) FROM pg_stat_user_tables" >>"$OUT"
}

expect() { # what got want
	[ "$2" = "$3" ] || die "$1: $2, want $3"
	log "ok: $1 = $2"
}

# snapshot prints every row a report writes (machines, network configs,
# allocations) and the number of audit events, in a fixed order.
snapshot() {
	sql "SELECT machine_id, kind, host_machine_id, state, version, updated_at, expected_machine_id, chassis_serial_number, serial_number FROM machines ORDER BY machine_id"
	sql "SELECT machine_id, loopback_ip, loopback_ip_v6, version, updated_at FROM network_configs ORDER BY machine_id"
	sql "SELECT pool_id, value_key, value, state, owner_type, owner_id, allocated_at FROM allocations ORDER BY pool_id, value_key"
	sql "SELECT count(*) FROM audit_events"
}

# reserved_held POOL COLUMN: bring-up DPUs whose allocation in POOL and
# network config both hold the value their ExpectedDpu reserves.
reserved_held() {
	sql "SELECT count(*) FROM machines m
		JOIN expected_dpus e ON e.serial_number = m.serial_number
		JOIN network_configs n ON n.machine_id = m.machine_id
		JOIN allocations a ON a.owner_type = 'machine' AND a.owner_id = m.machine_id AND a.state = 'allocated'
		JOIN pools p ON p.id = a.pool_id AND p.name = '$1'
		WHERE m.kind = 'dpu' AND m.serial_number LIKE 'bu-%' AND a.value = e.$2 AND n.$2 = e.$2"
}

# common_checks: no value held twice, no DPU holding two values of a pool,
# and every DPU's network config naming the values it holds.
common_checks() {
	local dpus
	dpus=$(sql "SELECT count(*) FROM machines WHERE kind = 'dpu'")
	expect "values held twice" "$(sql "SELECT count(*) FROM (SELECT pool_id, value_key FROM allocations GROUP BY pool_id, value_key HAVING count(*) > 1) d")" 0
	expect "DPUs holding two values of one pool" "$(sql "SELECT count(*) FROM (SELECT pool_id, owner_id FROM allocations WHERE owner_type = 'machine' AND state = 'allocated' GROUP BY pool_id, owner_id HAVING count(*) > 1) d")" 0
	expect "DPU values held that their network config names" "$(sql "SELECT count(*) FROM network_configs n
		JOIN allocations a ON a.owner_type = 'machine' AND a.owner_id = n.machine_id AND a.state = 'allocated'
		JOIN pools p ON p.id = a.pool_id
		WHERE (p.name = 'lo-ip' AND a.value = n.loopback_ip) OR (p.name = 'lo-ip-v6' AND a.value = n.loopback_ip_v6)")" $((2 * dpus))
}

# --- bring-up ---------------------------------------------------------
log "bring-up: $HOSTS hosts, $((HOSTS * DPUS)) DPUs, $CLIENTS clients, db $DB"
"$BIN/emgen" -ingest-run bu -clients "$CLIENTS" -count "$HOSTS" -dpus "$DPUS" >"$H7_TMP/em.json"
c0=$(cpu_ms)
put=$(curl -sS -o "$H7_TMP/put.out" -w '%{http_code} %{time_total}' -X PUT -H "Authorization: Bearer $ADMIN_TOKEN" \
	-H 'Content-Type: application/json' --data-binary "@$H7_TMP/em.json" "$U1/api/v1/expected-machines")
[ "${put%% *}" = 200 ] || die "PUT expected-machines: $put $(head -c 300 "$H7_TMP/put.out")"
PUT_S=${put#* }
PUT_CPU=$(($(cpu_ms) - c0))
log "PUT of $HOSTS ExpectedMachines: $PUT_S s, server CPU $PUT_CPU ms"

seq_scans scans-before-bringup
ingest bringup -run bu -count "$HOSTS" -slice "$SLICE_REPORTS"
BU=$LAST
seq_scans scans-after-bringup
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
read -r BU_S BU_RATE BU_P50 BU_P99 < <(field "$BU" seconds per_second p50_ms p99_ms)
log "bring-up: $HOSTS reports in $BU_S s"

expect "hosts" "$(sql "SELECT count(*) FROM machines WHERE kind = 'host'")" "$HOSTS"
expect "bring-up DPUs" "$(sql "SELECT count(*) FROM machines WHERE kind = 'dpu' AND serial_number LIKE 'bu-%'")" $((HOSTS * DPUS))
expect "DPUs holding their reserved IPv4 loopback" "$(reserved_held lo-ip loopback_ip)" $((HOSTS * DPUS))
expect "DPUs holding their reserved IPv6 loopback" "$(reserved_held lo-ip-v6 loopback_ip_v6)" $((HOSTS * DPUS))
common_checks
BU_MACHINES=$(sql "SELECT count(*) FROM machines")

snapshot >"$H7_TMP/before-repeat"
log "snapshot before the repeat: $(wc -l <"$H7_TMP/before-repeat") lines"
ingest repeat -run bu -count "$SAMPLE"
snapshot >"$H7_TMP/after-repeat"
if ! cmp -s "$H7_TMP/before-repeat" "$H7_TMP/after-repeat"; then
	diff "$H7_TMP/before-repeat" "$H7_TMP/after-repeat" | head -20 >&2
	die "repeating $SAMPLE reports changed rows"
fi
log "ok: repeating $SAMPLE reports changed no row"

# --- growth -----------------------------------------------------------
GROW=$(((MACHINES - BU_MACHINES + PER_HOST - 1) / PER_HOST))
GR=""
if [ "$GROW" -gt 0 ]; then
	log "growth: $GROW reports of new hosts (automatic loopbacks) to reach $MACHINES machines"
	seq_scans scans-before-growth
	# Report numbers after the bring-up's (the run name alone already gives new MACs).
	ingest growth -run grow -first $(((HOSTS + CLIENTS - 1) / CLIENTS)) -count "$GROW" -slice "$SLICE_REPORTS"
	GR=$LAST
	seq_scans scans-after-growth
	read -r GR_S GR_RATE GR_P50 GR_P99 < <(field "$GR" seconds per_second p50_ms p99_ms)
	expect "machines" "$(sql "SELECT count(*) FROM machines")" $((BU_MACHINES + GROW * PER_HOST))
	expect "DPUs with both loopbacks" "$(sql "SELECT count(*) FROM machines m JOIN network_configs n ON n.machine_id = m.machine_id
		WHERE m.kind = 'dpu' AND n.loopback_ip IS NOT NULL AND n.loopback_ip_v6 IS NOT NULL")" $(((HOSTS + GROW) * DPUS))
	expect "DPUs still holding their reserved IPv4 loopback" "$(reserved_held lo-ip loopback_ip)" $((HOSTS * DPUS))
	common_checks
fi
END_MACHINES=$(sql "SELECT count(*) FROM machines")
LOAD2=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$OUT" "$HOSTS" "$DB" "$(cd "$ROOT" && git rev-parse --short HEAD)" "$PUT_S" "$PUT_CPU" \
	"$BU_MACHINES" "$END_MACHINES" "$LOAD0" "$LOAD1" "$LOAD2" "$SAMPLE" <<'PY'
import json, sys
out, hosts, db, commit, put_s, put_cpu, bu_m, end_m, l0, l1, l2, sample = sys.argv[1:]
rec = {"label": "bringup-run", "db": db, "commit": commit, "hosts": int(hosts), "put_seconds": float(put_s),
       "put_server_cpu_ms": int(put_cpu),
       "machines_after_bringup": int(bu_m), "machines_at_end": int(end_m), "repeated_reports": int(sample),
       "checks": "passed", "loadavg": [l0, l1, l2]}
with open(out, "a") as f:
    f.write(json.dumps(rec) + "\n")
PY

# --- summary ----------------------------------------------------------
cpu_per_report() { # SUMMARY: "CPU per report: postgres X ms, server Y ms"
	python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print("CPU per report: " + ", ".join("%s %.1f ms" % (k, v / d["ok"]) for k, v in sorted(d["cpu_ms"].items())))' "$1"
}
summary() {
	echo "## Site bring-up: $HOSTS hosts ($((HOSTS * DPUS)) DPUs), then growth to $END_MACHINES machines ($DB)"
	echo
	echo "$INFO"
	echo "- command: \`HOSTS=$HOSTS MACHINES=$MACHINES CLIENTS=$CLIENTS SLICE=$SLICE DB=$DB scripts/bench-bringup.sh\`; raw lines: bench/results/$(basename "$OUT")"
	echo "- load average: before $LOAD0; after the bring-up $LOAD1; at the end $LOAD2"
	echo "- PUT /api/v1/expected-machines of $HOSTS records ($((HOSTS * DPUS)) DPUs, both loopbacks reserved): $PUT_S s, server CPU $PUT_CPU ms"
	printf -- '- bring-up: %s reports from %s clients in %.1f s end to end, %.0f reports/s, p50 %.1f ms, p99 %.1f ms, %s\n' \
		"$HOSTS" "$CLIENTS" "$BU_S" "$BU_RATE" "$BU_P50" "$BU_P99" "$(cpu_per_report "$BU")"
	echo "- checked in SQL after the bring-up: every DPU holds exactly its reserved IPv4 and IPv6 loopback ($((HOSTS * DPUS)) each), no value held twice, no DPU holding two values of a pool; repeating $SAMPLE of the reports changed no row and wrote no audit event"
	if [ -n "$GR" ]; then
		printf -- '- growth: %s reports of new hosts (automatic loopbacks) in %.1f s, %.0f reports/s, p50 %.1f ms, p99 %.1f ms, %s; every DPU holds both loopbacks at the end\n' \
			"$GROW" "$GR_S" "$GR_RATE" "$GR_P50" "$GR_P99" "$(cpu_per_report "$GR")"
	fi
	python3 - "$OUT" "$HOSTS" "$GROW" <<'PY'
import json, sys
out, phases = sys.argv[1], {"bring-up": int(sys.argv[2]), "growth": int(sys.argv[3])}
s = {}
for line in open(out):
    d = json.loads(line)
    if d.get("label", "").startswith("scans-"):
        s[d["label"]] = d["seq_tup_read"]
notes = []
for phase, a, b in (("bring-up", "scans-before-bringup", "scans-after-bringup"), ("growth", "scans-before-growth", "scans-after-growth")):
    if a in s and b in s and phases[phase] > 0:
        per = {t: (v - s[a].get(t, 0)) / phases[phase] for t, v in s[b].items()}
        top = sorted(((v, t) for t, v in per.items() if v >= 1), reverse=True)[:4]
        notes.append(f"{phase}: " + (", ".join(f"{t} {v:,.0f}" for v, t in top) or "none"))
if notes:
    print("- PostgreSQL rows read by sequential scans per report (pg_stat_user_tables; a look-up without a usable index grows with its table): " + "; ".join(notes))
PY
	echo
	python3 - "$OUT" "$SLICE_REPORTS" "$PER_HOST" 0 "$BU_MACHINES" <<'PY'
import json, sys
out, per_slice, per_host, base_bu, base_gr = sys.argv[1], *map(int, sys.argv[2:])
rows = {"bringup": [], "growth": []}
for line in open(out):
    d = json.loads(line)
    if "slice" in d and d.get("label") in rows:
        rows[d["label"]].append(d)
procs = sorted({k for r in rows.values() for d in r for k in d.get("cpu_ms", {})})
def cpu(d, k):
    return d.get("cpu_ms", {}).get(k, 0) / d["ok"] if d["ok"] else float("nan")
print("| phase | machines at start of slice | reports | reports/s | p50 ms | p99 ms |" + "".join(f" {k} CPU ms/report |" for k in procs))
print("|---|---:|---:|---:|---:|---:|" + "---:|" * len(procs))
for phase, base in (("bringup", base_bu), ("growth", base_gr)):
    for d in rows[phase]:
        name = "bring-up (reserved)" if phase == "bringup" else "growth (automatic)"
        print(f"| {name} | {base + d['from_request'] * per_host:,} | {d['requests']:,} | {d['per_second']:.0f} | {d['p50_ms']:.1f} | {d['p99_ms']:.1f} |"
              + "".join(f" {cpu(d, k):.1f} |" for k in procs))
print()
def ratios(a, b):
    r = b["per_second"] / a["per_second"] if a["per_second"] else float("nan")
    p = b["p50_ms"] / a["p50_ms"] if a["p50_ms"] else float("nan")
    c = "".join(f", {k} CPU/report {cpu(b, k) / cpu(a, k):.2f}" for k in procs if cpu(a, k))
    return f"reports/s {r:.2f}, p50 {p:.2f}{c}"
every = rows["bringup"] + rows["growth"]
notes = []
for phase, name in (("bringup", "the bring-up (reserved)"), ("growth", "the growth (automatic)")):
    if len(rows[phase]) > 1:
        notes.append(f"- within {name}: {ratios(rows[phase][0], rows[phase][-1])}")
if every:
    notes.append(f"- whole run (first slice reserved, last automatic): {ratios(every[0], every[-1])}")
print("Flatness, last slice / first slice:\n")
print("\n".join(notes))
PY
}
summary | tee "$TXT"
