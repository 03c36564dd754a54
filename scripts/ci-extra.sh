#!/usr/bin/env bash
# Called by .ci/run after the test suite: a short run of every fuzz target
# (the long runs and their exec counts are in docs/reliability.md), the
# short reliability scripts (kill -9 and PostgreSQL restart under load)
# and the release build with a check of what it wrote.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME="${FUZZTIME:-10s}"
while read -r pkg target; do
  echo "fuzz $pkg $target ($FUZZTIME)"
  # -fuzzminimizetime 0s: no minimizing of new inputs in a short run. A
  # minimization still running when -fuzztime ends is reported as a
  # failure ("context deadline exceeded") though nothing failed; a real
  # crasher is still reported, unminimized.
  # Go's fuzzer still sometimes ends a run on a loaded machine with
  # "context deadline exceeded" and no failing input; such a run is made
  # once more. A crasher always says "Failing input written to" and
  # fails at once.
  for try in 1 2; do
    if go test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 0s -parallel 2 >/tmp/ipledger-fuzz.log 2>&1; then
      break
    fi
    if [ "$try" = 1 ] && grep -q 'context deadline exceeded' /tmp/ipledger-fuzz.log && ! grep -q 'Failing input written to' /tmp/ipledger-fuzz.log; then
      echo "fuzz $pkg $target: the run ended on the fuzzer's own deadline with no failing input; running it again"
      continue
    fi
    cat /tmp/ipledger-fuzz.log >&2
    exit 1
  done
  tail -n 2 /tmp/ipledger-fuzz.log
done <<'TARGETS'
./allocator FuzzParseValue
./allocator FuzzRangeSpec
./poolfile FuzzParsePoolFile
./web FuzzExpectedMachineBodies
./cni FuzzParseConfig
./cni FuzzAddressEntry
TARGETS
scripts/ci-reliability.sh
scripts/release-check.sh
