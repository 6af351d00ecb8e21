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
  test: {
    ...base.test,
    include: ["packages/worker/test/**/*.test.ts"],
    /**
     * One known leak of BullMQ 5's own, not Keel's: when a worker that was waiting for a job (its
     * blocking fetch in flight) is closed, BullMQ 5.81's ioredis rejects the pending command with
     * "Connection is closed." and nothing in BullMQ handles that promise (seen twice per run, in the
     * contract case that stops a worker in the same turn it takes; never with BullMQ 6). Only that
     * rejection, from ioredis's own close handler, is let through; any other unhandled error fails
     * the run as usual.
     */
    onUnhandledError(error) {
      const stack = String((error as { stack?: unknown }).stack ?? "");
      if (error.message === "Connection is closed." && stack.includes("ioredis/built/redis/event_handler"))
        return false;
    },
  },
});
