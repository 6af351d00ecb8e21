/**
 * A worker through Redis faults (issue 23, items 1-3), on a Redis of the test's own (a free port,
 * stopped by its PID; the shared one is never touched): killed and restarted, paused, reached
 * through a proxy that stalls. The worker never fails for an outage shorter than `engineDownMs`:
 * it says so once (`worker:engine` down, then up), takes nothing meanwhile, and takes again after;
 * every call it makes is bounded by `engineTimeoutMs`. Waits are on conditions, with generous hang
 * guards; nothing asserts a duration.
 */
import { action, type KeelEvent, run, suspend, until } from "@keel/core";
import { isEngineTimeoutError, isEngineUnavailableError, useWorker } from "@keel/worker";
import { useBullQueue } from "@keel/worker/bullmq";
import { afterEach, describe, expect, it } from "vitest";
import { CHILD_TEST_TIMEOUT_MS, startChild } from "../../core/test/support/child.js";
import { hasRedisServer, type OwnRedis, startRedis } from "./fixtures/redis-server.js";
import { engineEvents, eventually, serve } from "./support-faults.js";

const faultWorker = new URL("./fixtures/fault-worker.ts", import.meta.url);

let redis: OwnRedis | null = null;
afterEach(async () => {
  await redis?.stop();
  redis = null;
});

describe.skipIf(!hasRedisServer)("a worker through Redis faults (a Redis of the test's own)", () => {
  it("Redis killed, then restarted with its data: down once, nothing taken meanwhile, up once, every job completed once", async () => {
    const own = (redis = await startRedis({ appendonly: true }));
    const events: KeelEvent[] = [];
    const outcome = await run(
      function* test() {
        const queue = yield* useBullQueue<string>({
          name: "faults",
          connection: own.connection,
          lockMs: 2_000,
        });
        const s = yield* serve(queue, { concurrency: 2, engineTimeoutMs: 500 });
        for (let i = 0; i < 5; i++) yield* queue.add("x", { id: `a${i}` });
        yield* eventually("5 completed", function* () {
          return (yield* s.worker().stats()).completed === 5;
        });
        yield* until(own.kill());
        yield* eventually("the engine down", function* () {
          return (yield* s.worker().stats()).engine.state === "down";
        });
        const whileDown = yield* s.worker().stats();
        yield* until(own.restart());
        yield* eventually("the engine up", function* () {
          return (yield* s.worker().stats()).engine.state === "up";
        });
        for (let i = 0; i < 5; i++) yield* queue.add("x", { id: `b${i}` });
        yield* eventually("10 completed", function* () {
          return (yield* queue.counts()).completed === 10;
        });
        const counts = yield* queue.counts();
        yield* s.task.cancel();
        return { whileDown, counts, ran: s.ran };
      },
      { onEvent: (e) => events.push(e) },
    );
    expect(outcome.whileDown.engine).toMatchObject({ state: "down" });
    expect(outcome.whileDown.inFlight).toBe(0);
    expect(engineEvents(events)).toEqual(["down", "up"]);
    expect(outcome.counts).toMatchObject({ completed: 10, active: 0, waiting: 0, deadLettered: 0 });
    expect([...outcome.ran].sort()).toEqual(["a0", "a1", "a2", "a3", "a4", "b0", "b1", "b2", "b3", "b4"]);
  }, 60_000);

  it("Redis gone longer than engineDownMs: the worker fails with EngineUnavailableError (its cause the last failure), after its shutdown", async () => {
    const own = (redis = await startRedis());
    const events: KeelEvent[] = [];
    const error = await run(
      function* test() {
        const queue = yield* useBullQueue<string>({ name: "faults", connection: own.connection });
        yield* useWorker(queue, function* handle() {}, { engineTimeoutMs: 300, engineDownMs: 1_000 });
        yield* queue.add("x", { id: "a" });
        yield* eventually("a completed", function* () {
          return (yield* queue.counts()).completed === 1;
        });
        yield* until(own.kill());
        yield* suspend();
      },
      { onEvent: (e) => events.push(e) },
    ).catch((e: unknown) => e);
    expect(isEngineUnavailableError(error)).toBe(true);
    expect((error as Error).message).toMatch(
      /^queue faults: the engine did not answer for \d+ ms \(engineDownMs\)/,
    );
    expect((error as Error).cause).toBeDefined();
    expect(engineEvents(events)).toEqual(["down"]);
    expect(
      events.filter((e) => e.type === "worker:shutdown").map((e) => (e as { phase: string }).phase),
    ).toContain("stop");
  }, 60_000);

  it("Redis paused while a job runs: its completion is bounded, the delivery ends stalled, the worker runs on; resumed, the job ends completed once", async () => {
    const own = (redis = await startRedis());
    const events: KeelEvent[] = [];
    const outcome = await run(
      function* test() {
        const queue = yield* useBullQueue<string>({
          name: "faults",
          connection: own.connection,
          lockMs: 2_000,
        });
        let release: (() => void) | null = null;
        const s = yield* serve(queue, { engineTimeoutMs: 300 }, function* (id) {
          if (id === "held")
            yield* action<void>((resolve) => {
              release = resolve;
              return () => {};
            }, "the test's latch");
        });
        yield* queue.add("x", { id: "held" });
        yield* eventually("the handler running", () => release !== null);
        own.pause();
        (release as unknown as () => void)();
        yield* eventually("the delivery stalled", () =>
          events.some((e) => e.type === "worker:job" && e.transition === "stalled"),
        );
        const stats = yield* s.worker().stats();
        own.resume();
        yield* eventually("the engine up", function* () {
          return (yield* s.worker().stats()).engine.state === "up";
        });
        yield* queue.add("y", { id: "after" });
        yield* eventually("2 completed", function* () {
          return (yield* queue.counts()).completed === 2;
        });
        const counts = yield* queue.counts();
        yield* s.task.cancel();
        return { stats, counts, ran: s.ran };
      },
      { onEvent: (e) => events.push(e) },
    );
    const stalled = events.find((e) => e.type === "worker:job" && e.transition === "stalled");
    expect(stalled).toMatchObject({ jobId: "held", reason: "engine-down" });
    expect(outcome.stats).toMatchObject({ stalled: 1, inFlight: 0, engine: { state: "down" } });
    expect(engineEvents(events)).toEqual(["down", "up"]);
    // The paused call lands once Redis resumes: the job ends completed, and is not run again.
    expect(outcome.counts).toMatchObject({ completed: 2, active: 0, waiting: 0 });
    expect(outcome.ran).toEqual(["held", "after"]);
  }, 60_000);

  it(
    "a SIGTERM while Redis is down: the whole shutdown fits in the guide's drainMs + cleanupBudgetMs + closeCapMs + 1,000 (main's budget), exit 143",
    async () => {
      const own = (redis = await startRedis());
      const child = startChild(faultWorker, String(own.port), "sigterm", "hang");
      await child.waitForLine("ready");
      await run(function* add() {
        const queue = yield* useBullQueue<string>({
          name: "faults",
          connection: own.connection,
          prefix: "sigterm",
        });
        yield* queue.add("x", { id: "h1" });
        yield* queue.add("x", { id: "h2" });
      });
      await child.waitForLine("started h1");
      await child.waitForLine("started h2");
      await own.kill();
      child.process.kill("SIGTERM");
      const exit = await child.exited;
      expect({ code: exit.code, stderr: child.stderr() }).toMatchObject({ code: 143 });
    },
    CHILD_TEST_TIMEOUT_MS,
  );

  it("Redis paused: the queue's own calls for its caller (add, counts) throw an EngineTimeoutError naming the call at callTimeoutMs, not waiting for ever", async () => {
    const own = (redis = await startRedis());
    const outcome = await run(function* test() {
      const queue = yield* useBullQueue<string>({
        name: "faults",
        connection: own.connection,
        callTimeoutMs: 300,
      });
      yield* queue.add("x", { id: "before" });
      own.pause();
      const errors: unknown[] = [];
      for (const call of [() => queue.add("y", { id: "during" }), () => queue.counts()])
        try {
          yield* call();
        } catch (e) {
          errors.push(e);
        }
      own.resume();
      return { errors, counts: yield* queue.counts() };
    });
    expect(outcome.errors.map((e) => (e as Error).message)).toEqual([
      "queue faults: add got no answer within 300 ms (callTimeoutMs)",
      "queue faults: counts got no answer within 300 ms (callTimeoutMs)",
    ]);
    expect(outcome.errors.every((e) => isEngineTimeoutError(e))).toBe(true);
    // The add Redis had not answered lands once it resumes: a timeout says "unknown", not "not done".
    expect(outcome.counts.waiting).toBeGreaterThanOrEqual(1);
  }, 60_000);
});
