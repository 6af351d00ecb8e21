/**
 * `worker.stats()`'s handler durations are read by people (dashboards, logs, the demo's summary):
 * on the real clock, whose readings are fractional, p50 and p99 have at most one decimal.
 */
import { run, sleep } from "@keel/core";
import { describe, expect, it } from "vitest";
import { createMemoryQueue, useWorker } from "../src/index.js";

describe("worker stats on the real clock", () => {
  it("gives p50 and p99 to a tenth of a millisecond", async () => {
    const stats = await run(function* () {
      const queue = yield* createMemoryQueue<number>({ name: "n" });
      const worker = yield* useWorker(
        queue,
        function* work(job) {
          yield* sleep(job.data + 0.37);
        },
        { concurrency: 3 },
      );
      for (const ms of [1, 2, 3, 4, 5]) yield* queue.add(ms);
      while ((yield* worker.stats()).completed < 5) yield* sleep(5);
      return yield* worker.stats();
    });
    const { p50, p99 } = stats.durationMs;
    expect(p50).toBeGreaterThan(0);
    expect(p99).toBeGreaterThanOrEqual(p50);
    for (const v of [p50, p99]) expect(String(v)).toMatch(/^\d+(\.\d)?$/);
  });
});
