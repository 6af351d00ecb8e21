/**
 * The worker's view of its engine's health (issue 23, items 1 and 2), pinned to the instant on the
 * virtual clock: the embedded engine behind a switch that makes its calls fail or hang, as a Redis
 * that refuses or does not answer would (the fault tests in `redis-faults.test.ts` do the same
 * with a real Redis, on the real clock). Down once, nothing taken, a probe every second, up once;
 * `engineDownMs` ends the worker; an outcome the engine does not answer is `stalled` at
 * `engineTimeoutMs`.
 */
import { type LogRecord, type Operation, sleep, spawn, suspend, type Task } from "@keel/core";
import { createHarness } from "@keel/testing";
import {
  createMemoryQueue,
  type EngineJob,
  isEngineUnavailableError,
  type Queue,
  type QueueEngine,
  useWorker,
  type Worker,
} from "@keel/worker";
import { describe, expect, it } from "vitest";

type Mode = "up" | "fail" | "hang";

/** `inner` behind a switch: `fail` throws at once (ECONNREFUSED), `hang` never answers. */
function flaky<T>(inner: QueueEngine<T>, state: { mode: Mode; forgotten: string[] }): QueueEngine<T> {
  function* call<R>(op: () => Operation<R>): Generator<unknown, R, unknown> {
    if (state.mode === "fail")
      throw Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
    if (state.mode === "hang") yield* suspend();
    return yield* op();
  }
  const wrap =
    <A extends unknown[], R>(f: (...a: A) => Operation<R>) =>
    (...a: A): Operation<R> => ({ [Symbol.iterator]: () => call(() => f(...a)) });
  return {
    name: inner.name,
    add: wrap((data: T, o) => inner.add(data, o)),
    take: wrap(() => inner.take()),
    complete: wrap((job: EngineJob<T>, value?: unknown, next?: boolean) => inner.complete(job, value, next)),
    retry: wrap((job: EngineJob<T>, f) => inner.retry(job, f)),
    deadLetter: wrap((job: EngineJob<T>, l, next?: boolean) => inner.deadLetter(job, l, next)),
    release: wrap((job: EngineJob<T>) => inner.release(job)),
    progress: wrap((job: EngineJob<T>, v: unknown) => inner.progress(job, v)),
    counts: wrap(() => inner.counts()),
    deadLetters: wrap(() => inner.deadLetters()),
    close: () => inner.close(),
    forget(job) {
      state.forgotten.push(job.id);
    },
  };
}

function* flakyQueue(state: { mode: Mode; forgotten: string[] }): Generator<unknown, Queue<string>, unknown> {
  const q = yield* createMemoryQueue<string>({ name: "q" });
  const engine = flaky(q.engine, state);
  // A forgotten job comes back as BullMQ's stalled check would bring it (here at once).
  engine.forget = (job) => {
    state.forgotten.push(job.id);
    q.engine.release(job)[Symbol.iterator]().next();
  };
  return { ...q, engine };
}

/** A worker in a task of its own, taking with one slot; its handler notes each job and instant. */
function* serve(queue: Queue<string>, now: () => number, options: Parameters<typeof useWorker<string>>[2]) {
  const taken: string[] = [];
  let worker: Worker | null = null;
  const task: Task<void> = yield* spawn(function* service() {
    worker = yield* useWorker(
      queue,
      function* handle(job) {
        taken.push(`${job.id}@${now()}`);
      },
      options,
    );
    yield* suspend();
  });
  yield* sleep(0);
  return { task, taken, worker: () => worker as unknown as Worker };
}

/** Adds past the switch (the queue's own `add` is the embedded engine's): the job is there, whatever the engine answers the worker. */
function* addInner(queue: Queue<string>, id: string) {
  yield* queue.add("x", { id });
}

describe("engine health (virtual clock)", () => {
  it("an outcome the engine refuses: down once, the delivery stalled at engineTimeoutMs, nothing taken while down, a probe each 500 ms, up once at the first answer", async () => {
    const h = createHarness();
    const state = { mode: "up" as Mode, forgotten: [] as string[] };
    const logged: LogRecord[] = [];
    const { taken, readings } = await h.run(
      function* test() {
        const queue = yield* flakyQueue(state);
        const s = yield* serve(queue, () => h.clock.now(), { engineTimeoutMs: 500 });
        yield* sleep(100);
        state.mode = "fail";
        yield* addInner(queue, "a");
        yield* sleep(100);
        const readings = [(yield* s.worker().stats()).engine];
        yield* sleep(1_300);
        yield* addInner(queue, "c");
        yield* sleep(1_000);
        state.mode = "up";
        yield* sleep(200);
        readings.push((yield* s.worker().stats()).engine);
        yield* s.task.cancel();
        return { taken: s.taken, readings };
      },
      { logger: (r) => logged.push(r) },
    );
    expect(h.eventsOf("worker:engine").map((e) => `${e.state}@${e.at}`)).toEqual(["down@100", "up@2600"]);
    expect(h.eventsOf("worker:engine")[1]).toMatchObject({ downForMs: 2500 });
    const stalled = h.eventsOf("worker:job").filter((e) => e.transition === "stalled");
    expect(stalled.map((e) => `${e.jobId}:${e.reason}@${e.at}`)).toEqual(["a:engine-down@600"]);
    expect(state.forgotten).toEqual(["a"]);
    // "a" ran at 100 (its completion refused); back after its stall, it and "c" wait for the engine.
    expect(taken).toEqual(["a@100", "a@2600", "c@2600"]);
    expect(readings[0]).toMatchObject({ state: "down", sinceMs: 100 });
    expect(String((readings[0] as { error?: unknown }).error)).toContain("ECONNREFUSED");
    expect(readings[1]).toEqual({ state: "up", sinceMs: 100 });
    const warnings = logged.filter((r) => r.event === "worker:engine");
    expect(warnings.map((r) => r.level)).toEqual(["warn", "warn"]);
    expect(warnings[0]!.message).toContain(
      "queue q: the engine stopped answering (Error: connect ECONNREFUSED)",
    );
    expect(warnings[1]!.message).toContain("queue q: the engine answers again after 2500 ms");
  });

  it("down for engineDownMs: the worker fails with EngineUnavailableError at the probe that finds it so, after its shutdown", async () => {
    const h = createHarness();
    const state = { mode: "up" as Mode, forgotten: [] as string[] };
    const error = await h
      .run(function* test() {
        const queue = yield* flakyQueue(state);
        yield* useWorker(queue, function* handle() {}, { engineTimeoutMs: 1_000, engineDownMs: 4_000 });
        yield* sleep(100);
        state.mode = "hang";
        yield* addInner(queue, "a");
        yield* suspend();
      })
      .catch((e: unknown) => e);
    expect(isEngineUnavailableError(error)).toBe(true);
    expect((error as Error).message).toMatch(
      /^queue q: the engine did not answer for 4\d{3} ms \(engineDownMs\)/,
    );
    expect(((error as Error).cause as Error).message).toBe(
      "queue q: a probe (counts) got no answer within 1000 ms (engineTimeoutMs)",
    );
    // Down when the completion went unanswered (at 1100); probes of 1 s each, a second apart.
    expect(h.eventsOf("worker:engine").map((e) => `${e.state}@${e.at}`)).toEqual(["down@1100"]);
    expect(h.eventsOf("worker:shutdown").map((e) => e.phase)[0]).toBe("stop");
  });

  it("engineDownMs: Infinity waits for the engine for as long as the worker runs", async () => {
    const h = createHarness();
    const state = { mode: "up" as Mode, forgotten: [] as string[] };
    const taken = await h.run(function* test() {
      const queue = yield* flakyQueue(state);
      const s = yield* serve(queue, () => h.clock.now(), { engineTimeoutMs: 1_000, engineDownMs: Infinity });
      yield* sleep(100);
      state.mode = "fail";
      yield* addInner(queue, "a");
      yield* sleep(3_600_000);
      state.mode = "up";
      yield* sleep(2_000);
      yield* s.task.cancel();
      return s.taken;
    });
    expect(h.eventsOf("worker:engine").map((e) => e.state)).toEqual(["down", "up"]);
    expect(taken.length).toBe(2);
  });
});
