#!/usr/bin/env bash
# Runs every fuzz target of ipledger one after the other (-parallel 1, so
# that it shares a small machine), each for $FUZZTIME (default 10m), and
# prints one line per target with the exec count it reached. Exits non-zero
# when a target finds a failing input (kept under the package's
# testdata/fuzz/ for `go test` to replay).
#
#   scripts/fuzz.sh                   # 10 minutes per target (docs/reliability.md)
#   FUZZTIME=10s scripts/fuzz.sh      # the short CI form
#   TARGETS="./allocator:FuzzParseValue" scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-10m}
LOGDIR=${LOGDIR:-$(mktemp -d /tmp/ipledger-fuzz.XXXXXX)}
mkdir -p "$LOGDIR"
if [ -z "${TARGETS:-}" ]; then
	TARGETS=""
	for pkg in ./allocator ./poolfile ./cni ./web ./handlers; do
		[ -d "$pkg" ] || continue
		for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$pkg"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
			TARGETS="$TARGETS $pkg:$f"
		done
	done
fi
rc=0
for t in $TARGETS; do
	pkg=${t%%:*}
	fn=${t##*:}
	name=${pkg#./}; logf="$LOGDIR/${name//\//_}-$fn.log"
	start=$(date -u +%H:%M:%S)
	if go test "$pkg" -run '^$' -fuzz "^$fn\$" -fuzztime "$FUZZTIME" -parallel 1 >"$logf" 2>&1; then
		status=ok
	else
		status=FAIL
		rc=1
	fi
	execs=$(grep -o 'execs: [0-9]*' "$logf" | tail -1 | awk '{print $2}')
	interesting=$(grep -o 'total: [0-9]*' "$logf" | tail -1 | awk '{print $2}')
	printf '%s %-10s %-28s %s execs=%s corpus=%s log=%s\n' "$start" "$pkg" "$fn" "$status" "${execs:-?}" "${interesting:-?}" "$logf"
	[ $status = ok ] || grep -A20 -- '--- FAIL' "$logf" | head -30
done
exit $rc
