#!/usr/bin/env bash
# Regenerates everything made from the .proto files with pinned generators
# (a fresh machine needs only Go): buf from tools/buf.mod, the protoc
# plugins from go.mod's tool directives (proto/buf.gen.yaml).
#   proto/gen/...                  Go messages and connect-go handlers (committed)
#   web/testdata/nicoproto/nico.binpb  descriptor set of the older NICo client
#                                  the gRPC tests are built from (committed)
# CI (.ci/run) runs it and fails when the committed files differ.
set -euo pipefail
cd "$(dirname "$0")/.."
BUF="go tool -modfile=$PWD/tools/buf.mod buf"
(cd proto && $BUF generate)
$BUF build web/testdata/nicoproto -o web/testdata/nicoproto/nico.binpb
