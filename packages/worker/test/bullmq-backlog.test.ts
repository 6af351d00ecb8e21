/**
 * The BullMQ engine's slots fill from a backlog at once (issue 23, item 6), with its bounds kept:
 * never more jobs held than slots, nothing lost when a worker stops with takes waiting, every job
 * completed once. Against the real Redis at 127.0.0.1:6379, each test on its own prefix, its keys
 * removed; skipped without Redis (see `redis.ts`). No timed assertion: handlers block on latches,
 * and deadlines only guard against a hang.
 */
import { action, type Operation, run, sleep, spawn, suspend, until } from "@keel/core";
import { type ShutdownReport, useWorker } from "@keel/worker";
import { type BullQueueHandle, useBullQueue } from "@keel/worker/bullmq";
import { Queue as BullQueue, Worker as BullWorker } from "bullmq";
import { describe, expect, it, vi } from "vitest";
import { redisUp } from "./redis.js";

const NAME = "backlog";

/** Runs `body` with a fresh queue on its own prefix, removing its keys after. */
async function withBull<R>(
  body: (queue: BullQueueHandle<number>, prefix: string) => Operation<R>,
): Promise<R> {
  const prefix = `keel-backlog-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  return run(function* test() {
    const queue = yield* useBullQueue<number>({
      name: NAME,
      connection: { host: "127.0.0.1", port: 6379 },
      prefix,
    });
    try {
      return yield* body(queue, prefix);
    } finally {
      yield* queue.obliterate();
    }
  });
}

/** A gate the handlers wait at until the test opens it. */
function createLatch() {
  let open = false;
  const waiting = new Set<() => void>();
  return {
    *wait(): Generator<unknown, void, unknown> {
      if (open) return;
      yield* action<void>((resolve) => {
        waiting.add(resolve);
        return () => waiting.delete(resolve);
      }, "latch");
    },
    open(): void {
      open = true;
      for (const resolve of waiting) resolve();
      waiting.clear();
    },
  };
}

/** Polls `done` every `pollMs` until it holds; fails after `guardMs` (a hang guard, not a timing). */
function* waitFor(done: () => boolean, what: string, guardMs = 5_000, pollMs = 10) {
  const deadline = Date.now() + guardMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`hang guard: ${what} not within ${guardMs} ms`);
    yield* sleep(pollMs);
  }
}

function* ended(queue: BullQueueHandle<number>, n: number, guardMs = 30_000) {
  let count = 0;
  const deadline = Date.now() + guardMs;
  for (;;) {
    const c = yield* queue.counts();
    count = c.completed + c.deadLettered;
    if (count >= n) return;
    if (Date.now() > deadline)
      throw new Error(`hang guard: ${count} of ${n} jobs ended within ${guardMs} ms`);
    yield* sleep(20);
  }
}

/** How many times each job was moved to active (BullMQ's `ats`, which a release does not undo). */
function activations(prefix: string, ids: readonly string[]): Operation<number[]> {
  return until(
    (async () => {
      const { Redis } = await import("ioredis");
      const redis = new Redis({ host: "127.0.0.1", port: 6379, maxRetriesPerRequest: null });
      try {
        const pipeline = redis.pipeline();
        for (const id of ids) pipeline.hget(`${prefix}:${NAME}:${id}`, "ats");
        const replies = (await pipeline.exec()) ?? [];
        return replies.map(([, v]) => Number(v ?? 0));
      } finally {
        redis.disconnect();
      }
    })(),
  );
}

/**
 * 32 jobs for a worker of concurrency 16 whose handlers wait at a latch: added `before` it starts,
 * or `after` (all at once, onto takes that wait); returns how many had completed when 16 ran.
 */
function* fillsAllSlots(queue: BullQueueHandle<number>, added: "before" | "after") {
  const add = function* addAll() {
    const adds = [];
    for (let i = 0; i < 32; i++)
      adds.push(
        yield* spawn(function* addOne() {
          yield* queue.add(i, { id: `j${i}` });
        }),
      );
    for (const a of adds) yield* a;
  };
  if (added === "before") yield* add();
  const latch = createLatch();
  let running = 0;
  let most = 0;
  let completed = 0;
  const handled: number[] = [];
  yield* useWorker(
    queue,
    function* held(job) {
      handled.push(job.data);
      most = Math.max(most, ++running);
      yield* latch.wait();
      running--;
      completed++;
    },
    { concurrency: 16 },
  );
  if (added === "after") {
    // The worker's first fetches found nothing: its takes wait on one blocking fetch.
    yield* sleep(200);
    yield* add();
  }
  let completedAtFull = -1;
  try {
    yield* waitFor(() => running === 16, "16 handlers running");
    completedAtFull = completed;
  } finally {
    latch.open();
  }
  yield* ended(queue, 32);
  return { completedAtFull, most, handled: handled.sort((a, b) => a - b), counts: yield* queue.counts() };
}

describe.skipIf(!redisUp)("the BullMQ engine fills its slots from a backlog", () => {
  it("with 32 jobs waiting, all 16 slots run a handler before any job completes", async () => {
    const r = await withBull((queue) => fillsAllSlots(queue, "before"));
    expect(r.completedAtFull).toBe(0);
    expect(r.most).toBe(16);
    expect(r.handled).toEqual(Array.from({ length: 32 }, (_, i) => i));
    expect(r.counts).toMatchObject({ completed: 32, active: 0, waiting: 0 });
  }, 30_000);

  it("an idle worker, its takes waiting on one blocking fetch, runs all 16 slots from 32 jobs added at once before any completes", async () => {
    const r = await withBull((queue) => fillsAllSlots(queue, "after"));
    expect(r.completedAtFull).toBe(0);
    expect(r.most).toBe(16);
    expect(r.handled).toEqual(Array.from({ length: 32 }, (_, i) => i));
    expect(r.counts).toMatchObject({ completed: 32, active: 0, waiting: 0 });
  }, 30_000);

  it("never holds more jobs active in Redis than its concurrency, from a backlog and from jobs added while takes wait", async () => {
    const concurrency = 8;
    const r = await withBull(function* (queue) {
      for (let i = 0; i < 60; i++) yield* queue.add(i);
      const handled: number[] = [];
      yield* useWorker(
        queue,
        function* short(job) {
          handled.push(job.data);
          // Some end at once (the next job comes with the completion), some after a while.
          if (job.data % 3 !== 0) yield* sleep(job.data % 7);
        },
        { concurrency },
      );
      let sampling = true;
      let mostActive = 0;
      let samples = 0;
      const sampler = yield* spawn(function* sample() {
        while (sampling) {
          mostActive = Math.max(mostActive, (yield* queue.counts()).active);
          samples++;
          yield* sleep(2);
        }
      });
      yield* ended(queue, 60);
      // Then bursts onto an idle worker: its takes wait on one blocking fetch, the rest fill after.
      for (let burst = 0; burst < 4; burst++) {
        for (let i = 0; i < 15; i++) yield* queue.add(60 + burst * 15 + i);
        yield* ended(queue, 75 + burst * 15);
      }
      sampling = false;
      yield* sampler;
      return { mostActive, samples, handled, counts: yield* queue.counts() };
    });
    expect(r.samples).toBeGreaterThan(0);
    expect(r.mostActive).toBeLessThanOrEqual(concurrency);
    expect(r.handled).toHaveLength(120);
    expect(new Set(r.handled).size).toBe(120);
    expect(r.counts).toMatchObject({ completed: 120, active: 0, waiting: 0 });
  }, 60_000);

  it("a worker stopped while its takes wait loses nothing: jobs fetched for them go back unspent and are counted as released", async () => {
    const r = await withBull(function* (queue, prefix) {
      const latch = createLatch();
      const first: string[] = [];
      let report: ShutdownReport | null = null;
      const service = yield* spawn(function* service() {
        yield* useWorker(
          queue,
          function* held(job) {
            first.push(job.id);
            yield* latch.wait();
          },
          {
            concurrency: 6,
            drainMs: 10_000,
            closeCapMs: 10_000,
            onShutdown: (r) => {
              report = r;
            },
          },
        );
        yield* suspend();
      });
      yield* queue.add(0, { id: "busy-0" });
      yield* queue.add(1, { id: "busy-1" });
      // Two slots busy, four takes waiting on the consumer's fetch.
      yield* waitFor(() => first.length === 2, "two handlers running");
      const stopping = yield* spawn(function* stop() {
        yield* service.cancel();
      });
      // Added as the worker stops: the fetch in flight for the takes it cancelled brings one back
      // (or a take still waiting runs it), and the shutdown's drain waits for the handlers.
      const ids = Array.from({ length: 10 }, (_, i) => `late-${i}`);
      for (const [i, id] of ids.entries()) yield* queue.add(10 + i, { id });
      latch.open();
      yield* stopping;
      const counts = yield* queue.counts();
      const all = ["busy-0", "busy-1", ...ids];
      const ats = yield* activations(prefix, all);
      const fetchedNotRun = all.filter((id, i) => ats[i]! > 0 && !first.includes(id));
      // Another worker runs what is left: each once, on its first attempt.
      const second: { id: string; attempt: number }[] = [];
      const again = yield* spawn(function* again() {
        yield* useWorker(queue, function* rest(job) {
          second.push({ id: job.id, attempt: job.attempt });
        });
        yield* ended(queue, all.length);
      });
      yield* again;
      return {
        report: report as ShutdownReport | null,
        first,
        fetchedNotRun,
        counts,
        second,
        all,
        end: yield* queue.counts(),
      };
    });
    expect(r.report).toMatchObject({
      inFlightAtStop: r.first.length,
      finishedInDrain: r.first.length,
      released: r.fetchedNotRun.length,
      closeTimedOut: false,
    });
    // Never more held than slots: the jobs run and the ones fetched for the cancelled takes.
    expect(r.first.length + r.fetchedNotRun.length).toBeLessThanOrEqual(6);
    expect(r.counts).toMatchObject({
      active: 0,
      completed: r.first.length,
      waiting: r.all.length - r.first.length,
    });
    expect([...r.first, ...r.second.map((s) => s.id)].sort()).toEqual([...r.all].sort());
    expect(r.second.every((s) => s.attempt === 1)).toBe(true);
    expect(r.end).toMatchObject({ completed: r.all.length, active: 0, waiting: 0 });
  }, 60_000);

  it("a global rate limit set through BullMQ is waited out: every job runs, with a few fetches instead of a spin", async () => {
    const fetches = vi.spyOn(BullWorker.prototype, "getNextJob");
    try {
      const r = await withBull(function* (queue, prefix) {
        // BullMQ's getNextJob answers nothing, without asking Redis, until the limit ends.
        const bull = new BullQueue(NAME, { connection: { host: "127.0.0.1", port: 6379 }, prefix });
        try {
          yield* until(bull.setGlobalRateLimit(2, 500));
        } finally {
          yield* until(bull.close());
        }
        for (let i = 0; i < 6; i++) yield* queue.add(i);
        const handled: number[] = [];
        yield* useWorker(
          queue,
          function* limited(job) {
            handled.push(job.data);
          },
          { concurrency: 4 },
        );
        yield* ended(queue, 6);
        return { handled: handled.sort((a, b) => a - b), fetches: fetches.mock.calls.length };
      });
      expect(r.handled).toEqual([0, 1, 2, 3, 4, 5]);
      // About 10 (the first round, then one per limit's end); a spin makes hundreds of thousands a second.
      expect(r.fetches).toBeLessThan(100);
    } finally {
      fetches.mockRestore();
    }
  }, 30_000);

  it("200 jobs at concurrency 8 are each completed exactly once", async () => {
    const r = await withBull(function* (queue) {
      const calls = new Map<string, number>();
      yield* useWorker(
        queue,
        function* count(job) {
          calls.set(job.id, (calls.get(job.id) ?? 0) + 1);
          if (job.data % 4 === 0) yield* sleep(job.data % 5);
        },
        { concurrency: 8 },
      );
      // Half at once, half in batches while the first are running.
      for (let i = 0; i < 100; i++) yield* queue.add(i, { id: `j${i}` });
      for (let b = 0; b < 10; b++) {
        for (let i = 0; i < 10; i++) yield* queue.add(100 + b * 10 + i, { id: `j${100 + b * 10 + i}` });
        yield* sleep(b % 3);
      }
      yield* ended(queue, 200);
      return { calls, counts: yield* queue.counts() };
    });
    expect(r.calls.size).toBe(200);
    expect([...r.calls.values()].every((n) => n === 1)).toBe(true);
    expect(r.counts).toMatchObject({ completed: 200, deadLettered: 0, active: 0, waiting: 0, delayed: 0 });
  }, 60_000);
});
