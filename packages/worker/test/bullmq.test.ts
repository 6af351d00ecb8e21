/**
 * The BullMQ engine against the real Redis at 127.0.0.1:6379 (each test its own prefix, its keys
 * removed). Without Redis the suite is skipped with one line saying how to start it; with
 * `KEEL_REQUIRE_REDIS=1` (as `.ci/run` sets it) a missing Redis fails instead.
 */
import { action, constant, isCancelled, type Operation, run, sleep, spawn, suspend } from "@keel/core";
import { useWorker, type Worker } from "@keel/worker";
import { type BullQueueHandle, useBullQueue } from "@keel/worker/bullmq";
import { describe, expect, it } from "vitest";
import { redisUp } from "./redis.js";

/** Runs `body` with a fresh queue on its own prefix, removing its keys after. */
async function withBull<R>(body: (queue: BullQueueHandle<string>) => Operation<R>): Promise<R> {
  return run(function* test() {
    const queue = yield* useBullQueue<string>({
      name: "contract",
      connection: { host: "127.0.0.1", port: 6379 },
      prefix: `keel-test-${process.pid}-${Math.random().toString(36).slice(2, 8)}`,
    });
    try {
      return yield* body(queue);
    } finally {
      yield* queue.obliterate();
    }
  });
}

function* settled(queue: BullQueueHandle<string>, n: number): Generator<unknown, void, unknown> {
  for (;;) {
    const c = yield* queue.counts();
    if (c.completed + c.deadLettered >= n) return;
    yield* sleep(20);
  }
}

/** Runs a fresh worker on `queue` until `n` jobs have ended, and returns the attempt of each delivery. */
function* attemptsOfAnotherWorker(
  queue: BullQueueHandle<string>,
  n: number,
): Generator<unknown, number[], unknown> {
  const attempts: number[] = [];
  const again = yield* spawn(function* again() {
    yield* useWorker(queue, function* record(job) {
      attempts.push(job.attempt);
    });
    yield* settled(queue, n);
  });
  yield* again;
  return attempts;
}

describe.skipIf(!redisUp)("the BullMQ engine (real Redis)", () => {
  it("add with an id already waiting adds nothing and says so", async () => {
    const r = await withBull(function* (queue) {
      return [yield* queue.add("a", { id: "x" }), yield* queue.add("b", { id: "x" }), yield* queue.counts()];
    });
    expect(r.slice(0, 2)).toEqual([
      { id: "x", added: true, state: "waiting" },
      { id: "x", added: false, state: "waiting" },
    ]);
    expect(r[2]).toMatchObject({ waiting: 1 });
  });

  it("refuses a lockMs that is not a whole number of milliseconds ≥ 100, or a connectTimeoutMs < 1, naming it", () => {
    const connection = { host: "127.0.0.1", port: 6379 };
    for (const lockMs of [50, 1.5, "1000"])
      expect(() => useBullQueue({ name: "q", connection, lockMs: lockMs as never })).toThrow(
        /useBullQueue\(\{ lockMs \}\): expected a whole number ≥ 100/,
      );
    for (const connectTimeoutMs of [0, 2.5, "1000"])
      expect(() =>
        useBullQueue({ name: "q", connection, connectTimeoutMs: connectTimeoutMs as never }),
      ).toThrow(/useBullQueue\(\{ connectTimeoutMs \}\): expected a whole number ≥ 1/);
  });

  it("refuses a payload BullMQ cannot store, with nothing added", async () => {
    const counts = await withBull(function* (queue) {
      const circular: Record<string, unknown> = {};
      circular.self = circular;
      expect(() => queue.add(circular as never)).toThrow(
        /queue\(contract\)\.add\(data\): expected a payload BullMQ can store as JSON/,
      );
      expect(() => queue.add(10n as never)).toThrow(TypeError);
      return yield* queue.counts();
    });
    expect(counts.waiting).toBe(0);
  });

  it("runs jobs to one outcome each: completed, retried then completed, rejected with its reason and history", async () => {
    const { dead, counts, stats } = await withBull(function* (queue) {
      let flaky = 0;
      const worker = yield* useWorker(
        queue,
        function* handle(job) {
          if (job.data === "flaky" && ++flaky === 1) throw Object.assign(new Error("busy"), { status: 503 });
          if (job.data === "bad") throw new TypeError("invalid");
          yield* job.progress(100);
        },
        { concurrency: 2, retry: { backoff: constant(50) } },
      );
      yield* queue.add("ok", { id: "j-ok" });
      yield* queue.add("flaky", { id: "j-flaky" });
      yield* queue.add("bad", { id: "j-bad" });
      yield* settled(queue, 3);
      return {
        dead: yield* queue.deadLetters(),
        counts: yield* queue.counts(),
        stats: yield* worker.stats(),
      };
    });
    expect(counts).toMatchObject({ completed: 2, deadLettered: 1, active: 0, waiting: 0, delayed: 0 });
    expect(stats).toMatchObject({ completed: 2, retried: 1, deadLettered: { rejected: 1 } });
    expect(dead).toHaveLength(1);
    expect(dead[0]).toMatchObject({ id: "j-bad", data: "bad", reason: "rejected" });
    expect(dead[0]!.error).toMatchObject({ name: "TypeError", message: "invalid" });
    expect(dead[0]!.history).toHaveLength(1);
  }, 30_000);

  it("a job cut at shutdown is released to Redis with its attempt unspent", async () => {
    const { report, counts, again } = await withBull(function* (queue) {
      let worker: Worker | null = null;
      let started = false;
      const service = yield* spawn(function* service() {
        worker = yield* useWorker(
          queue,
          function* hang() {
            started = true;
            yield* suspend();
          },
          { drainMs: 100, cleanupBudgetMs: 200, closeCapMs: 2000 },
        );
        yield* suspend();
      });
      yield* queue.add("x", { id: "j-hang" });
      // Wait for the handler, not for Redis' active count: a job is active in Redis as soon as the
      // fetch took it, before its reply reaches this process (a job fetched and not yet started is
      // put back too, but it was never in flight).
      while (!started) yield* sleep(10);
      yield* service.cancel();
      const counts = yield* queue.counts();
      const attempts = yield* attemptsOfAnotherWorker(queue, 1);
      return { report: (worker as Worker | null)?.shutdownReport ?? null, counts, again: attempts };
    });
    expect(report).toMatchObject({ inFlightAtStop: 1, released: 1, closeTimedOut: false });
    expect(counts).toMatchObject({ waiting: 1, active: 0 });
    expect(again).toEqual([1]);
  }, 30_000);

  it("a job fetched ahead by the last completion, never taken because the worker stopped, is put back and counted as released", async () => {
    /**
     * One try: "a"'s handler asks for the stop and returns at once, so that one Redis call completes
     * "a" and fetches "b" for this slot while the stop lands. Whether the stop lands before that reply
     * is a race (a scheduler turn against a Redis round trip); each outcome must be accounted right,
     * and the tries go on until the fetched-ahead one has happened.
     */
    const once = () =>
      withBull(function* (queue) {
        let worker: Worker | null = null;
        const handled: string[] = [];
        let stop: (() => void) | null = null;
        const service = yield* spawn(function* service() {
          worker = yield* useWorker(
            queue,
            function* first(job) {
              handled.push(job.data);
              stop?.();
            },
            { concurrency: 1, drainMs: 2000, closeCapMs: 5000 },
          );
          yield* suspend();
        });
        yield* queue.add("a", { id: "a" });
        yield* queue.add("b", { id: "b" });
        yield* action<void>((resolve) => {
          stop = resolve;
          return () => {};
        });
        yield* service.cancel();
        const counts = yield* queue.counts();
        const waiting = counts.waiting;
        const attempts = waiting > 0 ? yield* attemptsOfAnotherWorker(queue, 2) : [];
        return {
          report: (worker as Worker | null)?.shutdownReport ?? null,
          counts,
          handled,
          again: attempts,
        };
      });
    let fetchedAhead = 0;
    for (let i = 0; i < 8 && fetchedAhead === 0; i++) {
      const { report, counts, handled, again } = await once();
      if (handled.length === 2) {
        // The stop came after "b" was taken: it ran in the drain, and nothing went back.
        expect(report).toMatchObject({ released: 0, closeTimedOut: false });
        expect(counts).toMatchObject({ waiting: 0, active: 0, completed: 2 });
        continue;
      }
      fetchedAhead++;
      expect(handled).toEqual(["a"]);
      // "b" was locked for this worker (fetched with a's completion) and went back unspent.
      expect(report).toMatchObject({
        inFlightAtStop: 1,
        finishedInDrain: 1,
        released: 1,
        closeTimedOut: false,
      });
      expect(counts).toMatchObject({ waiting: 1, active: 0, completed: 1 });
      expect(again).toEqual([1]);
    }
    expect(fetchedAhead, "the fetched-ahead outcome, in 8 tries").toBe(1);
  }, 60_000);

  it("a job cancelled through BullMQ's cancelJob gets Cancelled in its task, runs its cleanup, and is dead-lettered once as rejected", async () => {
    const r = await withBull(function* (queue) {
      const seen: string[] = [];
      const worker = yield* useWorker(queue, function* handle() {
        try {
          seen.push("started");
          yield* suspend();
        } catch (e) {
          seen.push(isCancelled(e) ? "cancelled" : "other error");
          throw e;
        } finally {
          yield* sleep(10);
          seen.push("cleanup done");
        }
      });
      yield* queue.add("x", { id: "j-cancel" });
      while (seen.length === 0) yield* sleep(10);
      const found = queue.cancelJob("j-cancel", "operator");
      const unknown = queue.cancelJob("no-such-job");
      yield* settled(queue, 1);
      return {
        found,
        unknown,
        seen,
        counts: yield* queue.counts(),
        dead: yield* queue.deadLetters(),
        stats: yield* worker.stats(),
      };
    });
    expect([r.found, r.unknown]).toEqual([true, false]);
    expect(r.seen).toEqual(["started", "cancelled", "cleanup done"]);
    expect(r.counts).toMatchObject({ completed: 0, deadLettered: 1, active: 0, waiting: 0, delayed: 0 });
    expect(r.dead).toHaveLength(1);
    expect(r.dead[0]).toMatchObject({
      id: "j-cancel",
      reason: "rejected",
      error: {
        name: "JobCancelledError",
        code: "KEEL_JOB_CANCELLED",
        message: "contract/j-cancel: cancelled through the queue (operator)",
      },
    });
    expect(r.stats).toMatchObject({ completed: 0, retried: 0, deadLettered: { rejected: 1 } });
  }, 30_000);
});
