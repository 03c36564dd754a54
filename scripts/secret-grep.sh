#!/usr/bin/env bash
# Runs the whole test suite verbosely (PostgreSQL halves included) and
# searches everything it printed — test logs, server log lines the tests
# capture, failure messages — for the BMC passwords the tests and samples
# set (the BMC password appears in no response, page, log
# line or audit event). Exits non-zero when one is found or a test fails.
#
#   scripts/secret-grep.sh            # go test -count=1 -v ./...
#   PKGS=./web scripts/secret-grep.sh
set -uo pipefail
cd "$(dirname "$0")/.."
PKGS=${PKGS:-./...}
out=$(mktemp /tmp/ipledger-secret-grep.XXXXXX)
# Distinctive passwords only (short ones such as "pw" would match anything):
# the samples' factory defaults, the ones the allocator, web and console
# tests set, and the random one of web/security_test.go (fixed prefix).
# Webhook secrets of the feed tests too (webhook secrets are as secret),
# and the passwords and secrets of the upgrade fixtures (internal/upgrade).
secrets=(factory-default-1 factory-default-2 very-secret-pw-2 pw-in-file hunter2-secret Bmc-S3cret-
	s3cret-s3cret-s3cret webhook-secret-never-shown another-secret-0123456789 cli-secret-0123456789 console-secret-0123456789
	upgrade-fixture-bmc-pw upgrade-fixture-hook-secret upgrade-fixture-sso-pw)
go test -count=1 -v $PKGS >"$out" 2>&1
rc=$?
found=0
for s in "${secrets[@]}"; do
	n=$(grep -cF -- "$s" "$out" || true)
	if [ "$n" != 0 ]; then
		echo "FOUND the BMC password \"$s\" in $n lines of the test output:"
		grep -nF -- "$s" "$out" | head -5
		found=1
	fi
done
echo "test run exit status $rc; output: $(wc -l <"$out") lines in $out; passwords searched: ${secrets[*]}"
[ $rc = 0 ] || echo "FAIL: the test run itself failed (see $out)"
[ $found = 0 ] && [ $rc = 0 ] || exit 1
rm -f "$out"
echo "PASS: no BMC password in the output of a full test run"
