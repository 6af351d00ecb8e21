/**
 * The BullMQ test files against BullMQ 5 (run by scripts/bullmq5.sh): the root config's resolution,
 * with `bullmq` resolved to the copy at KEEL_BULLMQ_DIR (the worker processes the tests start get it
 * through scripts/bullmq-at.mjs), and only @keel/worker's files.
 */
import { defineConfig } from "vitest/config";
import base from "./vitest.config.js";

const dir = process.env.KEEL_BULLMQ_DIR;
if (!dir)
  throw new Error(
    "vitest.bullmq5.config.ts: set KEEL_BULLMQ_DIR to a folder whose node_modules has bullmq 5",
  );

export default defineConfig({
  ...base,
  resolve: { ...base.resolve, alias: [{ find: /^bullmq$/, replacement: `${dir}/node_modules/bullmq` }] },
  test: { ...base.test, include: ["packages/worker/test/**/*.test.ts"] },
});
