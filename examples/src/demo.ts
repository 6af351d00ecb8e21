/**
 * `npm run demo`: a worker on the embedded queue runs about 2,000 jobs, each calling a flaky HTTP
 * API (the fault server: slow answers, 503 with Retry-After, resets, hangs, invalid orders). A live
 * progress line while it runs, a summary at the end; Ctrl-C shuts it down within its budget and
 * prints what was released. `--jobs N` (or `KEEL_DEMO_JOBS`) changes the count. `--bullmq` runs the
 * same worker on BullMQ, on the Redis at 127.0.0.1:6379 (its own prefix, its keys removed at the end).
 * @module
 */
import { exponential, main, now, resource, sleep, spawn } from "@keel/core";
import { createHttpClient } from "@keel/core/http";
import { createFaultServer } from "@keel/testing";
import { createMemoryQueue, type Queue, useWorker } from "@keel/worker";
import { useBullQueue } from "@keel/worker/bullmq";
import { routeFor, routes } from "./worker/flaky-api.js";
import { progressLine, shutdownLines, summary } from "./worker/progress.js";

const flag = process.argv.indexOf("--jobs");
const jobs = Number(flag > 0 ? process.argv[flag + 1] : (process.env.KEEL_DEMO_JOBS ?? 2000));
const tty = process.stdout.isTTY === true;
const drainMs = 2000;
const cleanupBudgetMs = 1000;
const closeCapMs = 1000;
const bullmq = process.argv.includes("--bullmq");

type Order = { order: number };

/**
 * The BullMQ queue on its own prefix, its keys removed when it is torn down: acquired before the
 * worker, it goes after it (resources go in reverse order), so the worker drains and releases its
 * jobs before their keys are removed (removed before, a draining job would find its key gone).
 */
function useDemoBullQueue() {
  return resource<Queue<Order>>(function* demoQueue(provide) {
    const queue = yield* useBullQueue<Order>({
      name: "orders",
      connection: { host: "127.0.0.1", port: 6379 },
      prefix: `keel-demo-${process.pid}`,
    });
    try {
      yield* provide(queue);
    } finally {
      yield* queue.obliterate();
    }
  });
}

await main(
  function* demo() {
    const api = yield* createFaultServer(routes, { connectHang: false });
    const client = yield* createHttpClient({ baseUrl: api.url, retry: false, connections: 64 });
    // With --bullmq: BullMQ on the local Redis, on its own prefix, emptied once the worker is gone.
    const queue: Queue<Order> = bullmq
      ? yield* useDemoBullQueue()
      : yield* createMemoryQueue<Order>({ name: "orders" });
    const worker = yield* useWorker(
      queue,
      function* syncOrder(job) {
        yield* client.getJson(routeFor(job.id, job.attempt));
      },
      {
        concurrency: 64,
        timeoutMs: 1500,
        retry: { attempts: 4, backoff: exponential({ baseMs: 50, maxMs: 1000 }) },
        drainMs,
        cleanupBudgetMs,
        closeCapMs,
        onShutdown: (report) => {
          if (report.inFlightAtStop > 0) for (const line of shutdownLines(report)) console.log(line);
        },
      },
    );
    const engine = bullmq ? " (BullMQ on 127.0.0.1:6379)" : "";
    console.log(`Keel worker demo${engine}: ${jobs} jobs against a flaky API at ${api.url} (Ctrl-C to stop)`);
    const startedAt = yield* now();
    // Reports from the start: on Redis, adding 2,000 jobs takes a while, and the worker runs them
    // as they come.
    const reporter = yield* spawn(function* progress() {
      for (;;) {
        yield* sleep(tty ? 100 : 1000);
        const line = progressLine(yield* worker.stats(), (yield* now()) - startedAt);
        if (tty) process.stdout.write(`\r\x1b[2K${line}`);
        else console.log(line);
      }
    });
    try {
      for (let i = 1; i <= jobs; i++)
        yield* queue.add({ order: i }, { id: `order-${i}`, ttlMs: i % 100 === 0 ? 300 : 30_000 });
      for (;;) {
        const c = yield* queue.counts();
        if (c.completed + c.deadLettered >= jobs) break;
        yield* sleep(20);
      }
    } finally {
      yield* reporter.cancel();
      const stats = yield* worker.stats();
      const elapsedMs = (yield* now()) - startedAt;
      if (tty) process.stdout.write("\n");
      console.log(progressLine(stats, elapsedMs));
      for (const line of summary(stats, elapsedMs, yield* queue.deadLetters())) console.log(line);
    }
  },
  // The worker's shutdown (drainMs + cleanupBudgetMs + closeCapMs), the BullMQ queue's own close
  // (1,000 ms), and 1,000 ms for the summary and the demo queue's removal of its keys.
  { shutdownBudgetMs: drainMs + cleanupBudgetMs + closeCapMs + 1000 + 1000 },
);
