/**
 * Workers (`@keel/worker`): a service that runs a queue's jobs under deadlines, retries what is
 * retryable, dead-letters what is not, and shuts down within a budget without losing a job.
 */
import assert from "node:assert/strict";
import { constant, type Operation, sleep, suspend } from "@keel/core";
import { createHarness } from "@keel/testing";
import { createMemoryQueue, type ShutdownReport, useWorker } from "@keel/worker";

// 1. The layout of a service: what the jobs use is acquired first, the worker last, so at shutdown
//    the worker drains and is torn down before anything its jobs need.
{
  const h = createHarness();
  const reports: ShutdownReport[] = [];
  const service = h.run(function* service(): Operation<void> {
    const ledger: string[] = []; // stands in for an HTTP client or a database pool
    const queue = yield* createMemoryQueue<{ order: number }>({ name: "orders" });
    yield* useWorker(
      queue,
      function* syncOrder(job) {
        if (job.data.order === 2 && job.attempt === 1)
          throw Object.assign(new Error("busy"), { status: 503 });
        if (job.data.order === 3) throw new TypeError("invalid order");
        try {
          yield* sleep(job.data.order === 4 ? 60_000 : 100); // order 4 hangs
          ledger.push(`order ${job.data.order}`);
        } finally {
          if (job.data.order === 4) h.mark(`cleanup of order 4 (attempt ${job.attempt})`);
        }
      },
      {
        concurrency: 4,
        timeoutMs: 120_000,
        retry: { attempts: 3, backoff: constant(50) },
        drainMs: 1000,
        onShutdown: (report) => reports.push(report),
      },
    );
    for (const order of [1, 2, 3, 4]) yield* queue.add({ order }, { id: `o-${order}`, ttlMs: 600_000 });
    yield* suspend(); // serve until cancelled (main: SIGTERM)
  });
  await h.run(function* operator() {
    yield* sleep(500);
    h.mark("SIGTERM");
    yield* service.cancel();
  });
  // Stop at 500; order 4 is cut at 500 + drainMs and released (back in the queue, attempt unspent).
  assert.deepEqual(h.log, ["SIGTERM@500", "cleanup of order 4 (attempt 1)@1500"]);
  assert.deepEqual(
    reports.map((r) => [r.inFlightAtStop, r.finishedInDrain, r.released, r.elapsedMs]),
    [[1, 0, 1, 1000]],
  );
  const outcomes = h
    .eventsOf("worker:job")
    .map((e) => `${e.jobId} ${e.transition}${e.reason ? ` ${e.reason}` : ""}`);
  assert.deepEqual(
    outcomes.filter((o) => !o.endsWith("start")),
    ["o-2 retry error", "o-3 dead-letter rejected", "o-1 complete", "o-2 complete", "o-4 release"],
  );
  await h.expectClean();
}

// 2. Deadlines: a job carries its own (`ttlMs` or `deadlineAt`); each delivery runs under the nearer
//    of it and `timeoutMs`, and no retry is scheduled past it.
{
  const h = createHarness();
  const dead = await h.run(function* deadlines() {
    const queue = yield* createMemoryQueue<string>({ name: "quotes" });
    yield* useWorker(
      queue,
      function* quote() {
        yield* sleep(100);
        throw Object.assign(new Error("unavailable"), { status: 503 });
      },
      { timeoutMs: 5000, retry: { attempts: 10, backoff: constant(200) } },
    );
    yield* queue.add("q", { id: "q1", ttlMs: 550 });
    while ((yield* queue.counts()).deadLettered < 1) yield* sleep(10);
    return yield* queue.deadLetters();
  });
  // Deliveries at 0 and 300 fail at 100 and 400; a third could only start at 600, past 550.
  assert.equal(dead[0]?.reason, "exhausted");
  assert.deepEqual(
    dead[0]?.history.map((a) => a.startedAt),
    [0, 300],
  );
  await h.expectClean();
}
