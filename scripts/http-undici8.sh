#!/usr/bin/env bash
# The HTTP suite under Node 22 with undici 8 (npm's latest), beside npm test's Node 20 + undici 7.
# Both come from the npm registry (the `node` package carries the Node binary), into a folder kept
# between runs: KEEL_UNDICI8_DIR, else one under the temp dir named by the versions.
set -euo pipefail
cd "$(dirname "$0")/.."
node_version=22.23.3
undici_version=8.13.1
dir="${KEEL_UNDICI8_DIR:-${TMPDIR:-/tmp}/keel-http-node${node_version}-undici${undici_version}}"
if [ ! -x "$dir/node_modules/node/bin/node" ] || [ ! -f "$dir/node_modules/undici/package.json" ]; then
  mkdir -p "$dir"
  (cd "$dir" && [ -f package.json ] || echo '{"private":true}' >package.json)
  npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "node@$node_version" "undici@$undici_version"
fi
node22="$dir/node_modules/node/bin/node"
log=$(mktemp)
set +e
KEEL_UNDICI_PATH="$dir/node_modules/undici" KEEL_EXPECT_UNDICI=8 \
  "$node22" node_modules/vitest/vitest.mjs run --config vitest.undici8.config.ts 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
counts=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '^ +Tests ' | tail -1 | sed -E 's/^ +Tests +//')
echo "http suite on node $("$node22" --version) with undici $undici_version: ${counts:-no result}"
rm -f "$log"
exit "$status"
