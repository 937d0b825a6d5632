#!/usr/bin/env bash
# Runs node with the given arguments on a Node.js roomgate supports: the machine's when it is new
# enough (>= 22.12), else Node 24 fetched once into .tools/node24 by scripts/node24.sh. `npm start`
# and `npm test` go through it, so the README's two commands work on a machine whose Node is older
# (npm itself may run on that older Node: it only builds and calls this script).
#   bash scripts/with-node24.sh --version
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/node24.sh"
# Node's compile cache (Node >= 22.1) for this process and every process it starts (the test
# suite's gateways, backends and workers): modules are compiled once, not once per process. It
# lives with the dependencies (node_modules/.cache, like other tools' caches) and is rebuilt when
# a file changes.
export NODE_COMPILE_CACHE="${NODE_COMPILE_CACHE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/node_modules/.cache/node-compile}"
exec node "$@"
