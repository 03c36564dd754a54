#!/usr/bin/env bash
# Regenerates everything made from the .proto files, with pinned generator
# versions run through `go run` (a fresh machine needs only Go):
#   proto/gen/...                  Go messages and connect-go handlers (committed)
#   web/testdata/nicoproto/nico.binpb  descriptor set of the older NICo client
#                                  the gRPC tests are built from (committed)
# CI (.ci/run) runs it and fails when the committed files differ.
set -euo pipefail
cd "$(dirname "$0")/.."
BUF="go run github.com/bufbuild/buf/cmd/buf@v1.75.0"
(cd proto && $BUF generate)
$BUF build web/testdata/nicoproto -o web/testdata/nicoproto/nico.binpb
