# shellcheck shell=bash
# Consistency checks of the reliability scripts, run against the throwaway
# cluster after a load (source after lib.sh). Each prints what it found and
# counts violations in $VIOLATIONS.
# With DB=sqlite the checks read the SQLite file $SQLITE_FILE (sqlite3 CLI)
# instead of the throwaway PostgreSQL cluster.
VIOLATIONS=0

# db_q SQL: one statement against the run's database, unaligned output.
db_q() {
	if [ "${DB:-postgres}" = sqlite ]; then
		sqlite3 -batch -noheader -cmd '.timeout 10000' "$SQLITE_FILE" "$1"
	else
		psql_q -c "$1"
	fi
}

violation() {
	log "VIOLATION: $*"
	VIOLATIONS=$((VIOLATIONS + 1))
}

# check_acked FILE: every allocation a client saw acknowledged (pool, value,
# owner) is in the database, held by that owner.
check_acked() {
	local file=$1 n missing
	n=$(wc -l <"$file")
	local missing_q="SELECT count(*) FROM acked k WHERE NOT EXISTS (
		      SELECT 1 FROM allocations a JOIN pools p ON p.id = a.pool_id
		      WHERE p.name = k.pool AND a.value = k.value AND a.state = 'allocated'
		        AND a.owner_type = k.owner_type AND a.owner_id = k.owner_id)"
	if [ "${DB:-postgres}" = sqlite ]; then
		sqlite3 -batch -noheader -cmd '.timeout 10000' "$SQLITE_FILE" \
			"CREATE TEMP TABLE acked (pool text, value text, owner_type text, owner_id text)" \
			".mode tabs" ".import '$file' acked" "$missing_q" >"$H7_TMP/missing.txt"
	else
		psql_q -c "CREATE TEMP TABLE acked (pool text, value text, owner_type text, owner_id text)" \
			-c "\\copy acked FROM '$file'" -c "$missing_q" >"$H7_TMP/missing.txt"
	fi
	missing=$(tail -1 "$H7_TMP/missing.txt")
	log "acknowledged allocations: $n; missing from the database: $missing"
	[ "$n" -gt 0 ] || violation "no allocation was acknowledged at all"
	[ "$missing" = 0 ] || violation "$missing acknowledged allocations are not in the database"
}

# check_unique: no value held twice, no owner holding two values of a pool
# (the unique constraints must make these impossible; checked anyway).
check_unique() {
	local d o
	d=$(db_q "SELECT count(*) FROM (SELECT pool_id, value_key FROM allocations GROUP BY 1, 2 HAVING count(*) > 1) x")
	o=$(db_q "SELECT count(*) FROM (SELECT pool_id, owner_type, owner_id FROM allocations WHERE owner_id IS NOT NULL GROUP BY 1, 2, 3 HAVING count(*) > 1) x")
	log "values held twice: $d; owners holding two values of one pool: $o"
	[ "$d" = 0 ] || violation "$d values are held twice"
	[ "$o" = 0 ] || violation "$o owners hold two values of one pool"
}

# check_run_ends POOL: in an ipv4 pool, an allocation's run_end flag is
# true exactly when the next address is not held (the gap search relies on
# it), and every allocation has its audit event (same transaction).
check_run_ends() {
	local pool=$1 bad noaudit
	# Fresh statistics first: right after a load, autovacuum may not have
	# analysed the tables yet, and a plan made for small tables turned the
	# audit look-up below into minutes once (1 s with statistics).
	if [ "${DB:-postgres}" = sqlite ]; then db_q "ANALYZE" >/dev/null; else db_q "ANALYZE allocations, audit_events, pools" >/dev/null; fi
	# One ordered pass (a correlated look-up per row went quadratic once a
	# run stored 115k allocations).
	if [ "${DB:-postgres}" = sqlite ]; then
		# No inet type: the low 32 bits of the stored hex key, in order.
		bad=$(db_q "SELECT a.value_key, a.run_end FROM allocations a JOIN pools p ON p.id = a.pool_id
		      WHERE p.name = '$pool' ORDER BY a.value_key" |
			gawk -F'|' 'NR > 1 { bad += (prev_end != (strtonum("0x" substr($1, 25)) != prev + 1)) }
			            { prev = strtonum("0x" substr($1, 25)); prev_end = $2 }
			            END { print bad + (NR > 0 && prev_end != 1) }')
	else
		bad=$(db_q "SELECT count(*) FROM (
		        SELECT a.run_end, a.value::inet AS v, lead(a.value::inet) OVER (ORDER BY a.value::inet) AS nxt
		        FROM allocations a JOIN pools p ON p.id = a.pool_id WHERE p.name = '$pool') s
		      WHERE s.run_end <> (s.nxt IS NULL OR s.nxt <> s.v + 1)")
	fi
	noaudit=$(db_q "SELECT count(*) FROM allocations a JOIN pools p ON p.id = a.pool_id WHERE p.name = '$pool'
	      AND NOT EXISTS (SELECT 1 FROM audit_events e WHERE e.object_type = 'allocation' AND e.object_id = p.name || '/' || a.value
	                      AND e.action IN ('allocation.create', 'allocation.reclaim'))")
	log "pool $pool: wrong run_end flags: $bad; allocations without their audit event: $noaudit"
	[ "$bad" = 0 ] || violation "$bad allocations of $pool carry a wrong run_end flag"
	[ "$noaudit" = 0 ] || violation "$noaudit allocations of $pool have no audit event"
}

# check_ingestion: no half-written ingestion — every DPU machine has its
# network config, with an IPv4 loopback while lo-ip had space, and that
# loopback is allocated to the DPU.
check_ingestion() {
	local dpus nocfg noip mism
	dpus=$(db_q "SELECT count(*) FROM machines WHERE kind = 'dpu'")
	nocfg=$(db_q "SELECT count(*) FROM machines m WHERE m.kind = 'dpu' AND NOT EXISTS (SELECT 1 FROM network_configs n WHERE n.machine_id = m.machine_id)")
	noip=$(db_q "SELECT count(*) FROM machines m JOIN network_configs n ON n.machine_id = m.machine_id WHERE m.kind = 'dpu' AND n.loopback_ip IS NULL")
	mism=$(db_q "SELECT count(*) FROM network_configs n JOIN machines m ON m.machine_id = n.machine_id
	      WHERE m.kind = 'dpu' AND n.loopback_ip IS NOT NULL AND NOT EXISTS (
	        SELECT 1 FROM allocations a JOIN pools p ON p.id = a.pool_id
	        WHERE p.name = 'lo-ip' AND a.value = n.loopback_ip AND a.owner_type = 'machine' AND a.owner_id = n.machine_id)")
	log "DPUs: $dpus; without network config: $nocfg; without IPv4 loopback (lo-ip had space): $noip; loopback not allocated to the DPU: $mism"
	[ "$nocfg" = 0 ] || violation "$nocfg DPUs have a machine row but no network config"
	[ "$noip" = 0 ] || violation "$noip DPUs have no IPv4 loopback although lo-ip had space"
	[ "$mism" = 0 ] || violation "$mism DPU loopbacks are not allocated to their DPU"
}

# check_loadgen JSONLINE: the load generator saw no 5xx other than 503 and
# no hang (it lists those under "violations").
check_loadgen() {
	local line=$1 v
	v=$(printf '%s' "$line" | grep -o '"violations":\[[^]]*\]' || true)
	if [ -n "$v" ]; then
		violation "loadgen: $v"
	fi
}

# create_rel_pools creates the pools of a reliability run and sets
# RELPOOLS (their names) and LGPOOLS (loadgen's -pools): one pool "rel",
# or with POOLS=N the pools rel-0 … rel-(N-1); and lo-ip, for reports.
create_rel_pools() {
	RELPOOLS=(rel) LGPOOLS=rel
	if [ -n "${POOLS:-}" ]; then
		RELPOOLS=() LGPOOLS=rel%$POOLS
		for i in $(seq 0 $((POOLS - 1))); do
			api POST /api/v1/pools "{\"name\":\"rel-$i\",\"type\":\"ipv4\",\"ranges\":[{\"first\":\"10.$((64 + i)).0.0\",\"last\":\"10.$((64 + i)).255.255\",\"auto_assign\":true}]}" >/dev/null
			RELPOOLS+=("rel-$i")
		done
	else
		api POST /api/v1/pools '{"name":"rel","type":"ipv4","ranges":[{"first":"10.64.0.0","last":"10.95.255.255","auto_assign":true}]}' >/dev/null
	fi
	api POST /api/v1/pools '{"name":"lo-ip","type":"ipv4","ranges":[{"first":"10.180.0.0","last":"10.180.255.255","auto_assign":true}]}' >/dev/null
}
