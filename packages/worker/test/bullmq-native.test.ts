/**
 * Keel's BullMQ jobs are BullMQ's, both ways, against the real Redis (each test its own prefix, its
 * keys removed): a job a plain BullMQ producer adds is run by a Keel worker with its `data`, its
 * `attempts`, `delay` and `priority`; a job added through Keel reads as a plain job to BullMQ's own
 * `Queue` (data, state, attemptsMade, returnvalue, failedReason, stacktrace), with Keel's fields in
 * `opts.keel`, and a plain BullMQ `Worker` runs it.
 */
import { constant, type Operation, run, sleep, spawn, until } from "@keel/core";
import { useWorker } from "@keel/worker";
import { type BullQueueHandle, useBullQueue } from "@keel/worker/bullmq";
import { Queue as BullQueue, Worker as BullWorker, type Job } from "bullmq";
import { describe, expect, it } from "vitest";
import { redisUp, removeKeys } from "./redis.js";

const connection = { host: "127.0.0.1", port: 6379 };

/** A Keel queue and BullMQ's own `Queue` on the same name and prefix (another service's view). */
async function withBoth<R>(
  body: (keel: BullQueueHandle<unknown>, bull: BullQueue) => Operation<R>,
): Promise<R> {
  const prefix = `keel-native-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const bull = new BullQueue("native", { connection, prefix });
  try {
    return await run(function* test() {
      const keel = yield* useBullQueue<unknown>({ name: "native", connection, prefix });
      return yield* body(keel, bull);
    });
  } finally {
    await bull.close();
    await removeKeys(prefix);
  }
}

/** Polls BullMQ's own counts until `n` jobs have ended (completed or failed). */
function* ended(bull: BullQueue, n: number): Generator<unknown, void, unknown> {
  for (;;) {
    const c = yield* until(bull.getJobCounts("completed", "failed"));
    if ((c.completed ?? 0) + (c.failed ?? 0) >= n) return;
    yield* sleep(20);
  }
}

/** A failure Keel retries by default (a transient one). */
const transient = () => Object.assign(new Error("upstream 503"), { code: "ECONNRESET" });

describe("the BullMQ under test", () => {
  it("is the major it was given (KEEL_EXPECT_BULLMQ, scripts/bullmq5.sh), else the repository's 6", () => {
    // BullMQ 6 moved a queue's Redis calls to a backend (`getBackend`); 5 has none.
    const major = typeof (BullQueue.prototype as { getBackend?: unknown }).getBackend === "function" ? 6 : 5;
    expect(major).toBe(Number((process.env.KEEL_EXPECT_BULLMQ ?? "6").split(".")[0]));
  });
});

describe.skipIf(!redisUp)("BullMQ-native jobs (real Redis)", () => {
  it("a plain BullMQ producer's job runs with its data, attempts, delay and priority", async () => {
    const r = await withBoth(function* (keel, bull) {
      const addedAt = Date.now();
      yield* until(bull.add("email", { to: "a@example.com" }, { jobId: "p1", attempts: 2 }));
      yield* until(bull.add("later", { n: 2 }, { jobId: "p2", delay: 400 }));
      yield* until(bull.add("low", { n: 3 }, { jobId: "p3", priority: 5 }));
      const seen: { id: string; data: unknown; attempt: number; attempts: number; at: number }[] = [];
      const worker = yield* spawn(function* () {
        yield* useWorker(
          keel,
          function* handle(job) {
            seen.push({ id: job.id, data: job.data, attempt: job.attempt, attempts: 0, at: Date.now() });
            if (job.id === "p1" && job.attempt === 1) throw transient();
            return { sent: job.id };
          },
          { retry: { attempts: 5, backoff: constant(20) } },
        );
        yield* ended(bull, 3);
      });
      yield* worker;
      const p1 = (yield* until(bull.getJob("p1"))) as Job;
      return { seen, addedAt, p1, p1State: yield* until(p1.getState()) };
    });
    // p3 (priority 5) after the unprioritized p1; p2 last, once its delay passed (p1's retry, 20 ms
    // after its failure, may come before or after p3).
    const ids = r.seen.map((s) => s.id);
    expect(ids[0]).toBe("p1");
    expect(ids.slice(1, 3).sort()).toEqual(["p1", "p3"]);
    expect(ids[3]).toBe("p2");
    const p1 = r.seen.filter((s) => s.id === "p1");
    expect(p1).toMatchObject([
      { data: { to: "a@example.com" }, attempt: 1 },
      { data: { to: "a@example.com" }, attempt: 2 },
    ]);
    expect(r.seen[3]!.at - r.addedAt).toBeGreaterThanOrEqual(400);
    expect(r.p1State).toBe("completed");
    expect(r.p1.returnvalue).toEqual({ sent: "p1" });
    expect(r.p1.attemptsMade).toBe(2);
  });

  it("a plain job's own `attempts` is its limit: dead after 2, `failed` with its reason and stack", async () => {
    const r = await withBoth(function* (keel, bull) {
      yield* until(bull.add("flaky", { n: 1 }, { jobId: "f1", attempts: 2 }));
      const worker = yield* spawn(function* () {
        yield* useWorker(
          keel,
          function* handle() {
            throw transient();
          },
          { retry: { attempts: 10, backoff: constant(10) } },
        );
        yield* ended(bull, 1);
      });
      yield* worker;
      const job = (yield* until(bull.getJob("f1"))) as Job;
      return { job, state: yield* until(job.getState()), letters: yield* keel.deadLetters() };
    });
    expect(r.state).toBe("failed");
    expect(r.job.attemptsMade).toBe(2);
    expect(r.job.failedReason).toBe("upstream 503");
    expect(r.job.stacktrace).toHaveLength(2);
    expect(r.job.stacktrace?.[1]).toMatch(/^Error: upstream 503\n +at /);
    expect(r.job.data).toEqual({ n: 1 });
    expect(r.job.opts).toMatchObject({ keel: { deadReason: "exhausted" } });
    expect(r.letters).toMatchObject([{ id: "f1", data: { n: 1 }, reason: "exhausted" }]);
    expect(r.letters[0]!.history.map((a) => a.attempt)).toEqual([1, 2]);
  });

  it("a job added through Keel is a plain BullMQ job: data, state, attemptsMade, returnvalue", async () => {
    const r = await withBoth(function* (keel, bull) {
      yield* keel.add({ order: 7 }, { id: "k1", attempts: 3, ttlMs: 60_000, priority: 2 });
      yield* keel.add({ order: 8 }, { id: "k2" });
      const waiting = (yield* until(bull.getJob("k1"))) as Job;
      const waitingState = yield* until(waiting.getState());
      const worker = yield* spawn(function* () {
        yield* useWorker(
          keel,
          function* handle(job) {
            if (job.id === "k1" && job.attempt < 3) throw transient();
            if (job.id === "k2") throw new TypeError("bad order");
            return { shipped: (job.data as { order: number }).order };
          },
          { retry: { backoff: constant(10) } },
        );
        yield* ended(bull, 2);
      });
      yield* worker;
      const k1 = (yield* until(bull.getJob("k1"))) as Job;
      const k2 = (yield* until(bull.getJob("k2"))) as Job;
      return {
        waiting,
        waitingState,
        k1,
        k2,
        states: [yield* until(k1.getState()), yield* until(k2.getState())],
      };
    });
    expect(r.waiting.data).toEqual({ order: 7 });
    expect(r.waitingState).toBe("prioritized");
    expect(r.waiting.opts).toMatchObject({ attempts: 3, priority: 2, keel: { nonce: expect.any(String) } });
    expect((r.waiting.opts as { keel: { deadlineAt: number } }).keel.deadlineAt).toBeGreaterThan(Date.now());
    expect(r.states).toEqual(["completed", "failed"]);
    expect(r.k1).toMatchObject({ data: { order: 7 }, returnvalue: { shipped: 7 }, attemptsMade: 3 });
    expect((r.k1.opts as { keel: { history: unknown[] } }).keel.history).toHaveLength(2);
    expect(r.k2).toMatchObject({ data: { order: 8 }, failedReason: "bad order", attemptsMade: 1 });
    expect(r.k2.stacktrace?.[0]).toMatch(/^TypeError: bad order\n/);
    expect(r.k2.opts).toMatchObject({ keel: { deadReason: "rejected", deadError: { name: "TypeError" } } });
  });

  it("a plain BullMQ worker runs a job added through Keel, with the payload as its data", async () => {
    const r = await withBoth(function* (keel, bull) {
      yield* keel.add("hello", { id: "w1", attempts: 2 });
      const seen: unknown[] = [];
      const plain = new BullWorker(
        "native",
        async (job) => {
          seen.push(job.data);
          if (job.attemptsMade === 0) throw new Error("once");
          return `done ${job.data}`;
        },
        { connection, prefix: bull.opts.prefix },
      );
      try {
        yield* ended(bull, 1);
      } finally {
        yield* until(plain.close());
      }
      const job = (yield* until(bull.getJob("w1"))) as Job;
      return { seen, job };
    });
    expect(r.seen).toEqual(["hello", "hello"]);
    expect(r.job).toMatchObject({ returnvalue: "done hello", attemptsMade: 2 });
  });
});
