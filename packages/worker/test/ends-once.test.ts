/**
 * Each job ends exactly once, whatever its handler does (issue 23, items 4 and 7), against every
 * engine: a handler that swallows its cut and never returns is abandoned by the runtime, and its
 * slot ends the job (dead-lettered as `abandoned`, or released at shutdown); a cut whose `finally`
 * overruns the cleanup budget is released by the shutdown, counted in its report, with its event.
 */
import { isCancelled, type Operation, sleep, spawn, suspend, type Task } from "@keel/core";
import { isJobAbandonedError, type Queue, useWorker, type Worker } from "@keel/worker";
import { describe, expect, it } from "vitest";
import { type ContractHarness, engines } from "./engines.js";

/** A handler that ignores every cancellation, for ever (each catch waits again). */
function* stubborn(): Generator<unknown, void, unknown> {
  for (;;) {
    try {
      yield* suspend();
    } catch {}
  }
}

/** One cleanup step longer than the budget: cut by the runtime at the budget, the cut swallowed. */
function* overrun(): Generator<unknown, void, unknown> {
  try {
    yield* sleep(10_000);
  } catch (e) {
    if (!isCancelled(e)) throw e;
  }
}

for (const engine of engines) {
  describe.skipIf(engine.skip !== null)(`each job ends once: ${engine.name} engine`, () => {
    async function withQueue<R>(
      body: (queue: Queue<string>) => Operation<R>,
      h: ContractHarness,
    ): Promise<R> {
      const value = await h.run(function* test() {
        const queue = yield* engine.open<string>(`once-${Math.random().toString(36).slice(2, 8)}`);
        return yield* body(queue);
      });
      await h.expectClean();
      return value;
    }
    function* until(queue: Queue<string>, done: (c: { completed: number; deadLettered: number }) => boolean) {
      while (!done(yield* queue.counts())) yield* sleep(engine.pollMs);
    }

    it("a handler that swallows its timeout's cut and never returns: dead-lettered once as abandoned, its slot goes on", async () => {
      const h = engine.harness();
      const { dead, counts, stats } = await withQueue(function* (queue) {
        const worker = yield* useWorker(
          queue,
          function* handle(job) {
            if (job.id === "stuck") yield* stubborn();
          },
          { timeoutMs: 100, cleanupBudgetMs: 50 },
        );
        yield* queue.add("x", { id: "stuck" });
        yield* queue.add("y", { id: "next" });
        yield* until(queue, (c) => c.completed + c.deadLettered >= 2);
        return {
          dead: yield* queue.deadLetters(),
          counts: yield* queue.counts(),
          stats: yield* worker.stats(),
        };
      }, h);
      expect(dead).toHaveLength(1);
      expect(dead[0]).toMatchObject({ id: "stuck", reason: "abandoned" });
      // Its deadline at 100, the cut one budget past it (150), where a handler that swallows every
      // throw is abandoned at once (semantics §5 allows one more budget): the job ends at 150.
      if (!engine.realClock) expect(dead[0]!.at).toBe(100 + 50);
      expect(isJobAbandonedError(dead[0]!.error)).toBe(true);
      expect((dead[0]!.error as Error).message).toContain(
        "/stuck: its handler did not end within the cleanup budget after its cut",
      );
      expect(counts).toMatchObject({ active: 0, completed: 1, deadLettered: 1, waiting: 0 });
      expect(stats.deadLettered.abandoned).toBe(1);
      expect(h.eventsOf("cleanup:abandon").length).toBeGreaterThan(0);
      const ends = h.eventsOf("worker:job").filter((e) => e.jobId === "stuck" && e.transition !== "start");
      expect(ends.map((e) => `${e.transition}(${e.reason})`)).toEqual(["dead-letter(abandoned)"]);
    });

    it("a retryOn that throws: the job is dead-lettered once as rejected (what it threw in the error), the worker runs on", async () => {
      const h = engine.harness();
      const { dead, counts } = await withQueue(function* (queue) {
        yield* useWorker(
          queue,
          function* handle(job) {
            if (job.id === "bad") throw new Error("unavailable");
          },
          {
            retry: {
              retryOn() {
                throw new RangeError("a bug in retryOn");
              },
            },
          },
        );
        yield* queue.add("x", { id: "bad" });
        yield* queue.add("y", { id: "next" });
        yield* until(queue, (c) => c.completed + c.deadLettered >= 2);
        return { dead: yield* queue.deadLetters(), counts: yield* queue.counts() };
      }, h);
      expect(counts).toMatchObject({ completed: 1, deadLettered: 1, active: 0 });
      expect(dead[0]).toMatchObject({ id: "bad", reason: "rejected" });
      expect(dead[0]!.error).toMatchObject({ code: "KEEL_RETRY_ON_THREW" });
      expect((dead[0]!.error as Error).message).toMatch(
        /\/bad: retryOn threw RangeError: a bug in retryOn; the job is not retried$/,
      );
      expect(((dead[0]!.error as Error).cause as Error).message).toBe("unavailable");
    });

    for (const kind of ["never lets go", "overruns the cleanup budget in its finally"] as const)
      it(`a job cut at shutdown whose handler ${kind} is released once, counted in the report, with its event`, async () => {
        const h = engine.harness();
        const { report, counts } = await withQueue(function* (queue) {
          let worker: Worker | null = null;
          let started = false;
          const service: Task<void> = yield* spawn(function* service() {
            worker = yield* useWorker(
              queue,
              function* handle() {
                started = true;
                if (kind === "never lets go") return yield* stubborn();
                try {
                  yield* suspend();
                } finally {
                  yield* overrun();
                }
              },
              { drainMs: 0, cleanupBudgetMs: 50, closeCapMs: 2_000 },
            );
            yield* suspend();
          });
          yield* queue.add("x", { id: "cut" });
          while (!started) yield* sleep(engine.pollMs);
          yield* service.cancel();
          return { report: (worker as Worker | null)?.shutdownReport ?? null, counts: yield* queue.counts() };
        }, h);
        expect(report).toMatchObject({ inFlightAtStop: 1, finishedInDrain: 0, released: 1 });
        expect(counts).toMatchObject({ waiting: 1, active: 0, completed: 0, deadLettered: 0 });
        const ends = h.eventsOf("worker:job").filter((e) => e.transition !== "start");
        expect(ends.map((e) => `${e.jobId}:${e.transition}#${e.attempt}`)).toEqual(["cut:release#1"]);
        expect(h.eventsOf("worker:shutdown").find((e) => e.phase === "closed")?.released).toBe(1);
      });
  });
}
