/**
 * One soak run (see `soak.ts`): `engine` (bullmq | memory) runs `jobs` jobs, each calling the fault
 * server at `url` (a route picked per delivery: ok, slow, 503 with Retry-After, reset, hang,
 * invalid), with a producer that keeps at most `BACKLOG` jobs unended. At each tenth of the jobs
 * ended it samples the heap after a full GC. At the end it counts the outcomes from the engine's
 * own records (BullMQ: its completed and failed sets in Redis; the embedded queue: its counts and
 * dead letters), and prints one JSON line. Run with `--expose-gc`.
 * @module
 */
import { exponential, now, type Operation, resource, run, sleep, until } from "@keel/core";
import { createHttpClient } from "@keel/core/http";
import { createMemoryQueue, type DeadLetter, type Queue, useWorker } from "@keel/worker";
import { useBullQueue } from "@keel/worker/bullmq";
import { Redis } from "ioredis";
// The demo's flaky API: a route per delivery, a hash of the job's id and attempt.
import { routeFor } from "../../../examples/src/worker/flaky-api.js";

const [engine, jobsArg, url] = process.argv.slice(2) as ["bullmq" | "memory", string, string];
const jobs = Number(jobsArg);
const BACKLOG = 2000;
const connection = { host: "127.0.0.1", port: 6379 };
const prefix = `keel-soak-${process.pid}`;
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("soak-child: run with --expose-gc");

/** What the engine's own records say of the ids `1..jobs`. */
interface EngineTally {
  completed: number;
  deadLettered: number;
  /** Ids in neither set, in both, or outside `1..jobs`; jobs still waiting, delayed or active. */
  missing: number;
  inBoth: number;
  unknown: number;
  leftOver: number;
}

function* bullTally(): Generator<unknown, EngineTally, unknown> {
  const redis = new Redis({ ...connection, maxRetriesPerRequest: null });
  try {
    const key = (k: string) => `${prefix}:soak:${k}`;
    const p = Promise.all([
      redis.zrange(key("completed"), "0", "-1"),
      redis.zrange(key("failed"), "0", "-1"),
      redis.llen(key("wait")),
      redis.llen(key("active")),
      redis.zcard(key("delayed")),
      redis.zcard(key("prioritized")),
    ]);
    const [completed, failed, wait, active, delayed, prioritized] = yield* until(p);
    return tally(completed, failed, wait + active + delayed + prioritized);
  } finally {
    redis.disconnect();
  }
}

function* memoryTally(queue: Queue<number>): Generator<unknown, EngineTally, unknown> {
  // The embedded queue counts its outcomes, and keeps the newest dead letters (checked for
  // duplicates and strays); it keeps no record of a completed job (added without an id).
  const c = yield* queue.counts();
  const kept: readonly DeadLetter<number>[] = yield* queue.deadLetters();
  const t = tally(
    [],
    kept.map((d) => d.id),
    c.waiting + c.delayed + c.active,
  );
  return {
    ...t,
    completed: c.completed,
    deadLettered: c.deadLettered,
    missing: jobs - c.completed - c.deadLettered,
  };
}

function tally(completed: string[], failed: string[], leftOver: number): EngineTally {
  const seen = new Uint8Array(jobs + 1);
  let unknown = 0;
  let inBoth = 0;
  for (const [ids, bit] of [
    [completed, 1],
    [failed, 2],
  ] as const) {
    for (const id of ids) {
      const n = Number(id);
      if (!Number.isInteger(n) || n < 1 || n > jobs) unknown++;
      else if (seen[n]! & bit) unknown++;
      else {
        if (seen[n]) inBoth++;
        seen[n]! |= bit;
      }
    }
  }
  let missing = 0;
  for (let n = 1; n <= jobs; n++) if (!seen[n]) missing++;
  return { completed: completed.length, deadLettered: failed.length, missing, inBoth, unknown, leftOver };
}

/** The queue, its keys removed once the worker is gone (acquired before it, so torn down after). */
function useSoakQueue(): Operation<Queue<number>> {
  return resource<Queue<number>>(function* soakQueue(provide) {
    // The newest 100 dead letters (default 1,000, each ~9 kB with its HTTP errors): the heap
    // samples then measure the queue and the worker, not a list still filling up.
    if (engine === "memory")
      return yield* provide(yield* createMemoryQueue<number>({ name: "soak", deadLetterLimit: 100 }));
    const queue = yield* useBullQueue<number>({ name: "soak", connection, prefix });
    try {
      yield* provide(queue);
    } finally {
      yield* queue.obliterate();
    }
  });
}

const result = await run(function* soak() {
  const client = yield* createHttpClient({ baseUrl: url, retry: false, connections: 64 });
  const queue = yield* useSoakQueue();
  const worker = yield* useWorker(
    queue,
    function* call(job) {
      yield* client.getJson(routeFor(job.id, job.attempt));
    },
    {
      concurrency: 64,
      timeoutMs: 500,
      retry: { attempts: 4, backoff: exponential({ baseMs: 50, maxMs: 1000 }) },
      drainMs: 1000,
      cleanupBudgetMs: 1000,
      closeCapMs: 2000,
    },
  );
  const heapMb: number[] = [];
  const startedAt = yield* now();
  let added = 0;
  let ended = 0;
  while (ended < jobs) {
    // The producer keeps at most BACKLOG jobs unended (waiting, delayed, in flight).
    while (added < jobs && added - ended < BACKLOG) {
      yield* queue.add(added + 1);
      added++;
    }
    yield* sleep(20);
    const s = yield* worker.stats();
    ended = s.completed + s.deadLettered.expired + s.deadLettered.exhausted + s.deadLettered.rejected;
    while (heapMb.length < 10 && ended >= ((heapMb.length + 1) * jobs) / 10) {
      gc!();
      heapMb.push(process.memoryUsage().heapUsed / 2 ** 20);
    }
  }
  const elapsedMs = (yield* now()) - startedAt;
  const stats = yield* worker.stats();
  const records = engine === "bullmq" ? yield* bullTally() : yield* memoryTally(queue);
  return { engine, jobs, elapsedMs, stats, records, heapMb, rssMb: process.memoryUsage().rss / 2 ** 20 };
});
console.log(JSON.stringify(result));
