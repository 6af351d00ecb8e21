#!/usr/bin/env bash
# @keel/worker's tests against BullMQ 5 (its latest 5.x, from npm), beside npm test's BullMQ 6: the
# peer range admits both. BullMQ 5 is installed into a folder kept between runs (KEEL_BULLMQ5_DIR,
# else one under the temp dir named by the version); `bullmq` resolves there in vitest (its config)
# and in the worker processes the tests start (NODE_OPTIONS, scripts/bullmq-at.mjs).
set -euo pipefail
cd "$(dirname "$0")/.."
bullmq_version=5.81.5
dir="${KEEL_BULLMQ5_DIR:-${TMPDIR:-/tmp}/keel-bullmq${bullmq_version}}"
if [ ! -f "$dir/node_modules/bullmq/package.json" ]; then
  mkdir -p "$dir"
  (cd "$dir" && [ -f package.json ] || echo '{"private":true}' >package.json)
  npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "bullmq@$bullmq_version"
fi
installed=$(node -p "require('$dir/node_modules/bullmq/package.json').version")
log=$(mktemp)
set +e
KEEL_BULLMQ_DIR="$dir" KEEL_EXPECT_BULLMQ="$installed" \
  NODE_OPTIONS="${NODE_OPTIONS:-} --import=$PWD/scripts/bullmq-at.mjs" \
  node node_modules/vitest/vitest.mjs run --config vitest.bullmq5.config.ts 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
counts=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '^ +Tests ' | tail -1 | sed -E 's/^ +Tests +//')
echo "worker suite with bullmq $installed: ${counts:-no result}"
rm -f "$log"
exit "$status"
