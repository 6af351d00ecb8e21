/**
 * BullMQ across processes, against the real Redis at 127.0.0.1:6379: a worker process killed with
 * SIGKILL mid-job loses nothing (BullMQ's stalled check redelivers the job, which completes once),
 * and two worker processes on one queue share the jobs, each completed once. Counts come from
 * Redis. Skipped without Redis (one line says how to start it); `KEEL_REQUIRE_REDIS=1` fails instead.
 */
import { run, sleep, until } from "@keel/core";
import { useWorker } from "@keel/worker";
import { type BullQueueHandle, useBullQueue } from "@keel/worker/bullmq";
import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { CHILD_TEST_TIMEOUT_MS, startChild } from "../../core/test/support/child.js";
import { redisUp, removeKeys } from "./redis.js";

const fixture = new URL("./fixtures/bull-worker.ts", import.meta.url);
const connection = { host: "127.0.0.1", port: 6379 };

function freshPrefix(): string {
  return `keel-crash-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
}

/** Opens the fixture's queue in this process (same name, prefix and lock), removing its keys after. */
async function withQueue<R>(
  prefix: string,
  body: (queue: BullQueueHandle<string>, redis: Redis) => Generator<unknown, R, unknown>,
): Promise<R> {
  const value = await run(function* test() {
    const redis = new Redis({ ...connection, maxRetriesPerRequest: null });
    const queue = yield* useBullQueue<string>({ name: "crash", connection, prefix, lockMs: 1000 });
    try {
      return yield* body(queue, redis);
    } finally {
      yield* queue.obliterate();
      yield* until(redis.del(`${prefix}:runs`, `${prefix}:by`));
      redis.disconnect();
    }
  });
  // A child's worker, closing as the test ends, may write its queue's `meta` key again.
  await removeKeys(prefix);
  return value;
}

function* waitCompleted(queue: BullQueueHandle<string>, n: number): Generator<unknown, void, unknown> {
  while ((yield* queue.counts()).completed < n) yield* sleep(50);
}

describe.skipIf(!redisUp)("BullMQ worker processes (real Redis, real processes)", () => {
  it(
    "a process killed with SIGKILL mid-job loses nothing: the job is redelivered and completes once",
    async () => {
      const prefix = freshPrefix();
      const r = await withQueue(prefix, function* (queue, redis) {
        const doomed = startChild(fixture, prefix, "hang");
        yield* until(doomed.waitForLine("ready"));
        yield* queue.add("payload", { id: "j1" });
        yield* until(doomed.waitForLine("started j1"));
        doomed.process.kill("SIGKILL");
        const exit = yield* until(doomed.exited);
        const afterKill = yield* queue.counts();
        const attempts: number[] = [];
        const worker = yield* useWorker(queue, function* handle(job) {
          attempts.push(job.attempt);
          yield* until(redis.hincrby(`${prefix}:runs`, job.id, 1));
        });
        yield* waitCompleted(queue, 1);
        return {
          exit,
          afterKill,
          attempts,
          stats: yield* worker.stats(),
          counts: yield* queue.counts(),
          runs: yield* until(redis.hgetall(`${prefix}:runs`)),
        };
      });
      expect(r.exit.signal).toBe("SIGKILL");
      expect(r.afterKill).toMatchObject({ active: 1, completed: 0 });
      expect(r.counts).toEqual({ waiting: 0, delayed: 0, active: 0, completed: 1, deadLettered: 0 });
      expect(r.runs).toEqual({ j1: "1" });
      // The crash spent no attempt: the redelivery is still attempt 1.
      expect(r.attempts).toEqual([1]);
      expect(r.stats).toMatchObject({ completed: 1, retried: 0 });
    },
    CHILD_TEST_TIMEOUT_MS,
  );

  it(
    "two worker processes on one queue share the jobs, each completed once",
    async () => {
      const prefix = freshPrefix();
      const n = 30;
      const r = await withQueue(prefix, function* (queue, redis) {
        const a = startChild(fixture, prefix, "work");
        const b = startChild(fixture, prefix, "work");
        yield* until(Promise.all([a.waitForLine("ready"), b.waitForLine("ready")]));
        for (let i = 0; i < n; i++) yield* queue.add(`p${i}`, { id: `j${i}` });
        yield* waitCompleted(queue, n);
        a.process.kill("SIGTERM");
        b.process.kill("SIGTERM");
        const exits = yield* until(Promise.all([a.exited, b.exited]));
        return {
          exits,
          counts: yield* queue.counts(),
          runs: yield* until(redis.hgetall(`${prefix}:runs`)),
          by: yield* until(redis.hgetall(`${prefix}:by`)),
          pids: [a.process.pid, b.process.pid],
        };
      });
      expect(r.counts).toEqual({ waiting: 0, delayed: 0, active: 0, completed: n, deadLettered: 0 });
      expect(Object.keys(r.runs)).toHaveLength(n);
      expect(Object.values(r.runs).every((c) => c === "1")).toBe(true);
      const shares = r.pids.map((pid) => Number(r.by[String(pid)] ?? 0));
      expect(shares[0]! + shares[1]!).toBe(n);
      expect(shares.every((s) => s > 0)).toBe(true);
      // Each shut down on SIGTERM by itself (main exits 143), not killed.
      expect(r.exits.map((e) => e.signal)).toEqual([null, null]);
    },
    CHILD_TEST_TIMEOUT_MS,
  );
});
