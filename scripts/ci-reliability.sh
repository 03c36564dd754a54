#!/usr/bin/env bash
# The short form of the reliability scripts for CI (< 3 minutes): kill -9
# of one of two servers under a 32-client load (with DPU ingestion), on
# PostgreSQL and on one SQLite file, a PostgreSQL stop/start under load, and the change feed's ordering proof
# with 5,000 writes and a kill -9 half-way. Each runs its own throwaway PostgreSQL
# cluster and exits non-zero on any violation (docs/reliability.md).
set -euo pipefail
cd "$(dirname "$0")/.."
LOAD=10s KILL_AT=4 DOWN_FOR=2 scripts/reliability-kill9.sh
DB=sqlite LOAD=10s KILL_AT=4 DOWN_FOR=2 scripts/reliability-kill9.sh
LOAD=12s STOP_AT=3 DOWN_FOR=4 scripts/reliability-pg-restart.sh
EVENTS=5000 scripts/feed-order.sh
