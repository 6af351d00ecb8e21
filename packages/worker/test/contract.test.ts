/**
 * The worker's contract (issue 12), one suite run against every engine in `engines.ts`.
 */
import {
  constant,
  formatTaskTree,
  isCancelled,
  now,
  type Operation,
  remaining,
  scoped,
  sleep,
  snapshot,
  spawn,
  suspend,
  type Task,
  timeout,
} from "@keel/core";
import {
  type DeadLetter,
  isJobExpiredError,
  type Queue,
  type QueueEngine,
  type ShutdownReport,
  useWorker,
  type Worker,
  type WorkerOptions,
} from "@keel/worker";
import { describe, expect, it } from "vitest";
import { type EngineCase, engines, type ContractHarness as Harness } from "./engines.js";

/** `@t` on a virtual clock; nothing on a real one, where instants are not reproducible. */
function at(engine: EngineCase, t: number): string {
  return engine.realClock ? "" : `@${t}`;
}

const unavailable = () => Object.assign(new Error("unavailable"), { status: 503 });

for (const engine of engines) {
  /** Waits (polling the engine's own counts) until `n` jobs have ended completed or dead-lettered. */
  function* ended<T>(queue: Queue<T>, n: number): Generator<unknown, void, unknown> {
    for (;;) {
      const c = yield* queue.counts();
      if (c.completed + c.deadLettered >= n) return;
      yield* sleep(engine.pollMs);
    }
  }
  /** A test that pins exact instants: run on a virtual clock only. */
  const exact = engine.realClock ? it.skip : it;
  /** Expected transitions: as written on a virtual clock, without their `@at` on a real one. */
  function times(expected: string[]): string[] {
    return engine.realClock ? expected.map((x) => x.replace(/@\d+$/, "")) : expected;
  }
  /** The job transitions as `id:transition(reason)#attempt@at`; without `@at` on a real clock. */
  function jobEvents(h: Harness, transition?: string) {
    return h
      .eventsOf("worker:job")
      .filter((e) => transition === undefined || e.transition === transition)
      .map(
        (e) => `${e.jobId}:${e.transition}${e.reason ? `(${e.reason})` : ""}#${e.attempt}${at(engine, e.at)}`,
      );
  }

  describe.skipIf(engine.skip !== null)(`worker contract: ${engine.name} engine`, () => {
    /** Runs `body` with a queue of `engine`, then the leak check. */
    async function withQueue<R>(
      body: (queue: Queue<string>, h: Harness, root: () => Task<unknown>) => Operation<R>,
      h: Harness = engine.harness(),
    ): Promise<R> {
      const task: Task<R> = h.run(function* test() {
        const queue = yield* engine.open<string>(`contract-${Math.random().toString(36).slice(2, 8)}`);
        return yield* body(queue, h, () => task);
      });
      const value = await task;
      await h.expectClean();
      return value;
    }

    describe("each delivery is a task named after the job, under min(job deadline, now + timeoutMs)", () => {
      exact("remaining() inside sees the nearer of the job's deadline and the timeout", async () => {
        const seen: string[] = [];
        await withQueue(function* (queue) {
          yield* useWorker(
            queue,
            function* handle(job) {
              seen.push(`${job.id}: ${yield* remaining()} left, deadline ${job.deadline}`);
            },
            { timeoutMs: 500 },
          );
          yield* queue.add("a", { id: "near", ttlMs: 200 });
          yield* queue.add("b", { id: "far", ttlMs: 5000 });
          yield* queue.add("c", { id: "none" });
          yield* ended(queue, 3);
        });
        expect(seen).toEqual([
          "near: 200 left, deadline 200",
          "far: 500 left, deadline 5000",
          "none: 500 left, deadline Infinity",
        ]);
      });

      exact("a Keel timeout inside the handler is clamped by the delivery's deadline", async () => {
        const dead = await withQueue(function* (queue) {
          yield* useWorker(
            queue,
            function* handle() {
              yield* timeout(10_000, sleep(60_000));
            },
            { timeoutMs: 300, retry: { attempts: 1 } },
          );
          yield* queue.add("a", { id: "a" });
          yield* ended(queue, 1);
          return yield* queue.deadLetters();
        });
        // The delivery's 300 ms deadline wins over the handler's own 10 s timeout (the outer claim).
        expect(dead[0]).toMatchObject({ reason: "exhausted", at: 300 });
        expect(dead[0]!.error).toMatchObject({ name: "TimeoutError", deadline: 300 });
      });

      exact("the task tree shows each job in flight with its attempt", async () => {
        let tree = "";
        await withQueue(function* (queue, _h, root) {
          yield* useWorker(
            queue,
            function* handle(job) {
              if (job.id === "b") yield* sleep(100);
              else yield* sleep(50);
            },
            { concurrency: 2, timeoutMs: 1000 },
          );
          yield* queue.add("a", { id: "a" });
          yield* queue.add("b", { id: "b" });
          yield* sleep(10);
          tree = treeOf(root());
          yield* ended(queue, 2);
        });
        // One task per delivery, named after the job (queue and id) and its attempt, with its deadline.
        expect(tree).toMatch(/contract-\w+\/a attempt 1\/5#\d+ running .*deadline in 990ms/);
        expect(tree).toMatch(/contract-\w+\/b attempt 1\/5#\d+ running .*deadline in 990ms/);
      });
    });

    describe("each job ends exactly once", () => {
      exact("completed: once, with one complete event and a duration", async () => {
        const h = engine.harness();
        const stats = await withQueue(function* (queue) {
          const worker = yield* useWorker(queue, function* handle() {
            yield* sleep(40);
          });
          yield* queue.add("a", { id: "a" });
          yield* ended(queue, 1);
          return yield* worker.stats();
        }, h);
        expect(jobEvents(h)).toEqual(times(["a:start#1@0", "a:complete#1@40"]));
        expect(stats).toMatchObject({
          completed: 1,
          retried: 0,
          inFlight: 0,
          waiting: 0,
          durationMs: { p50: 40, p99: 40 },
        });
      });

      it("expired before it ran: a job whose deadline passed while it waited is not run", async () => {
        const ran: string[] = [];
        const dead = await withQueue(function* (queue) {
          yield* queue.add("late", { id: "late", ttlMs: 100 });
          yield* sleep(150);
          yield* useWorker(queue, function* handle(job) {
            ran.push(job.id);
          });
          yield* ended(queue, 1);
          return yield* queue.deadLetters();
        });
        expect(ran).toEqual([]);
        expect(dead).toHaveLength(1);
        expect(dead[0]).toMatchObject({ id: "late", reason: "expired", history: [] });
        expect(isJobExpiredError(dead[0]!.error)).toBe(true);
      });

      it("expired while it ran: the job's deadline cuts the handler and it is dead-lettered, not retried", async () => {
        const h = engine.harness();
        const dead = await withQueue(function* (queue) {
          yield* useWorker(
            queue,
            function* handle() {
              yield* sleep(10_000);
            },
            { timeoutMs: 5000 },
          );
          yield* queue.add("a", { id: "a", ttlMs: 200 });
          yield* ended(queue, 1);
          return yield* queue.deadLetters();
        }, h);
        expect(dead[0]).toMatchObject({
          id: "a",
          reason: "expired",
          ...(engine.realClock ? {} : { at: 200 }),
        });
        expect(isJobExpiredError(dead[0]!.error)).toBe(true);
        expect((dead[0]!.error as Error).cause).toMatchObject({ name: "TimeoutError" });
        expect(dead[0]!.history).toHaveLength(1);
        expect(jobEvents(h)).toEqual(times(["a:start#1@0", "a:dead-letter(expired)#1@200"]));
      });

      exact("exhausted: attempts spent, the attempt history kept", async () => {
        const h = engine.harness();
        const dead = await withQueue(function* (queue) {
          yield* useWorker(
            queue,
            function* handle() {
              yield* sleep(10);
              throw unavailable();
            },
            { retry: { attempts: 3, backoff: constant(100) } },
          );
          yield* queue.add("a", { id: "a" });
          yield* ended(queue, 1);
          return yield* queue.deadLetters();
        }, h);
        expect(dead[0]!.reason).toBe("exhausted");
        expect(dead[0]!.history.map((r) => [r.attempt, r.startedAt, r.endedAt, r.delayMs])).toEqual([
          [1, 0, 10, 100],
          [2, 110, 120, 100],
          [3, 220, 230, undefined],
        ]);
        expect((dead[0]!.error as Error).message).toBe("unavailable");
        expect(jobEvents(h, "retry")).toEqual(times(["a:retry(error)#1@10", "a:retry(error)#2@120"]));
      });

      it("a job's own attempts win over the worker's", async () => {
        const dead = await withQueue(function* (queue) {
          yield* useWorker(
            queue,
            function* handle() {
              throw unavailable();
            },
            { retry: { attempts: 5, backoff: constant(1) } },
          );
          yield* queue.add("a", { id: "a", attempts: 2 });
          yield* ended(queue, 1);
          return yield* queue.deadLetters();
        });
        expect(dead[0]!.history).toHaveLength(2);
      });

      it("rejected: a non-retryable error dead-letters at once, the error kept", async () => {
        const bad = new TypeError("bad payload");
        const dead = await withQueue(function* (queue) {
          yield* useWorker(queue, function* handle() {
            throw bad;
          });
          yield* queue.add("a", { id: "a" });
          yield* ended(queue, 1);
          return yield* queue.deadLetters();
        });
        expect(dead[0]).toMatchObject({ id: "a", reason: "rejected" });
        if (engine.realClock)
          expect(dead[0]!.error).toMatchObject({ name: "TypeError", message: "bad payload" });
        else expect(dead[0]!.error).toBe(bad);
        expect(dead[0]!.history).toHaveLength(1);
      });

      exact("retryOn decides, with the attempt and whether its own timeout cut it", async () => {
        const infos: string[] = [];
        await withQueue(function* (queue) {
          yield* useWorker(
            queue,
            function* handle(job) {
              if (job.attempt === 1) yield* sleep(1000);
              else throw new Error("plain");
            },
            {
              timeoutMs: 100,
              retry: {
                backoff: constant(0),
                retryOn: (e, info) => {
                  infos.push(`${(e as Error).name} ${info.attempt} ${info.timedOut} ${info.elapsedMs}`);
                  return info.timedOut;
                },
              },
            },
          );
          yield* queue.add("a", { id: "a" });
          yield* ended(queue, 1);
        });
        expect(infos).toEqual(["TimeoutError 1 true 100", "Error 2 false 100"]);
      });

      it("the dead-letter sink receives each dead job with its reason", async () => {
        const sunk: DeadLetter<string>[] = [];
        await withQueue(function* (queue) {
          yield* useWorker(
            queue,
            function* handle() {
              throw new RangeError("nope");
            },
            {
              deadLetter: function* store(letter) {
                yield* sleep(5);
                sunk.push(letter);
              },
            },
          );
          yield* queue.add("x", { id: "a" });
          yield* ended(queue, 1);
          yield* sleep(10);
        });
        expect(sunk.map((l) => `${l.id} ${l.reason} ${l.data}`)).toEqual(["a rejected x"]);
      });
    });

    describe("retried: redelivered after backoff, never scheduled past its deadline", () => {
      exact("redelivers after the backoff, and after an error's Retry-After instead", async () => {
        const starts: number[] = [];
        await withQueue(function* (queue) {
          yield* useWorker(
            queue,
            function* handle() {
              starts.push(yield* nowMs());
              if (starts.length === 1) throw Object.assign(unavailable(), { retryAfterMs: 700 });
              if (starts.length === 2) throw unavailable();
            },
            { retry: { backoff: constant(50) } },
          );
          yield* queue.add("a", { id: "a" });
          yield* ended(queue, 1);
        });
        expect(starts).toEqual([0, 700, 750]);
      });

      exact(
        "a retry that could only start past the job's deadline is not scheduled: exhausted at once",
        async () => {
          const h = engine.harness();
          const dead = await withQueue(function* (queue) {
            yield* useWorker(
              queue,
              function* handle() {
                yield* sleep(10);
                throw unavailable();
              },
              { retry: { backoff: constant(300) } },
            );
            yield* queue.add("a", { id: "a", ttlMs: 250 });
            yield* ended(queue, 1);
            return yield* queue.deadLetters();
          }, h);
          expect(dead[0]).toMatchObject({ reason: "exhausted", at: 10 });
          expect(jobEvents(h, "retry")).toEqual(times([]));
        },
      );

      exact("retry.budgetMs bounds all deliveries from the first one's start", async () => {
        const dead = await withQueue(function* (queue) {
          yield* useWorker(
            queue,
            function* handle() {
              throw unavailable();
            },
            { retry: { attempts: 100, backoff: constant(100), budgetMs: 350 } },
          );
          yield* queue.add("a", { id: "a" });
          yield* ended(queue, 1);
          return yield* queue.deadLetters();
        });
        expect(dead[0]!.reason).toBe("exhausted");
        expect(dead[0]!.history.map((r) => r.startedAt)).toEqual([0, 100, 200, 300]);
      });
    });

    describe("concurrency", () => {
      it("never more than `concurrency` handlers at once; a job is taken only when a slot is free", async () => {
        let running = 0;
        let most = 0;
        const activeSeen: number[] = [];
        await withQueue(function* (queue) {
          yield* useWorker(
            queue,
            function* handle() {
              running++;
              most = Math.max(most, running);
              activeSeen.push((yield* queue.counts()).active);
              yield* sleep(10);
              running--;
            },
            { concurrency: 3 },
          );
          for (let i = 0; i < 10; i++) yield* queue.add(`j${i}`);
          yield* ended(queue, 10);
        });
        expect(most).toBe(3);
        // The engine never had more than 3 active: nothing was taken ahead of a free slot.
        expect(Math.max(...activeSeen)).toBe(3);
      });
    });

    describe("stallMs", () => {
      exact(
        "a delivery with no progress for stallMs is cancelled (its cleanup runs) and retried",
        async () => {
          const h = engine.harness();
          const log: string[] = [];
          await withQueue(function* (queue) {
            yield* useWorker(
              queue,
              function* handle(job) {
                try {
                  if (job.attempt === 1) yield* suspend();
                } finally {
                  log.push(`cleanup ${job.attempt} @${yield* nowMs()}`);
                }
              },
              { stallMs: 200, retry: { backoff: constant(0) } },
            );
            yield* queue.add("a", { id: "a" });
            yield* ended(queue, 1);
          }, h);
          expect(log).toEqual(["cleanup 1 @200", "cleanup 2 @200"]);
          expect(jobEvents(h, "retry")).toEqual(times(["a:retry(stalled)#1@200"]));
        },
      );

      it("progress is a heartbeat: a job reporting progress is not cut", async () => {
        const h = engine.harness();
        await withQueue(function* (queue) {
          yield* useWorker(
            queue,
            function* handle(job) {
              for (let i = 0; i < 10; i++) {
                yield* sleep(100);
                yield* job.progress(i * 10);
              }
            },
            // Five steps long, and half the job: without the heartbeat it would be cut. The margin
            // is for the real clock (BullMQ), where a loaded machine delays a step and its progress
            // call by tens of milliseconds (150 ms failed there).
            { stallMs: 500 },
          );
          yield* queue.add("a", { id: "a" });
          yield* ended(queue, 1);
        }, h);
        expect(jobEvents(h)).toEqual(times(["a:start#1@0", "a:complete#1@1000"]));
      });
    });

    describe("graceful shutdown", () => {
      /** Adds job `h`, and 5 ms later cancels the service running the worker, logging both instants. */
      function* addThenStop(
        queue: Queue<string>,
        service: Task<void>,
        log: string[],
      ): Generator<unknown, void, unknown> {
        yield* queue.add("x", { id: "h" });
        yield* sleep(5);
        log.push(`stop @${yield* nowMs()}`);
        yield* service.cancel();
        log.push(`stopped @${yield* nowMs()}`);
      }

      function* shutdownScenario(
        queue: Queue<string>,
        options: WorkerOptions<string>,
        log: string[],
      ): Generator<unknown, ShutdownReport | null, unknown> {
        let worker: Worker | null = null;
        const scope: Task<void> = yield* spawn(function* service() {
          worker = yield* useWorker(
            queue,
            function* handle(job) {
              log.push(`start ${job.id}#${job.attempt} @${yield* nowMs()}`);
              try {
                yield* sleep(job.data === "quick" ? 100 : 60_000);
                log.push(`done ${job.id} @${yield* nowMs()}`);
              } finally {
                log.push(`finally ${job.id} @${yield* nowMs()}`);
              }
            },
            { concurrency: 2, timeoutMs: 120_000, ...options },
          );
          yield* suspend();
        });
        yield* queue.add("quick", { id: "q" });
        yield* queue.add("slow", { id: "s" });
        yield* queue.add("queued", { id: "w" });
        yield* sleep(10);
        const stopAt = yield* nowMs();
        log.push(`stop @${stopAt}`);
        yield* scope.cancel();
        log.push(`stopped @${yield* nowMs()}`);
        return (worker as Worker | null)?.shutdownReport ?? null;
      }

      exact(
        "stops taking at once, drains, cuts the rest at drainMs and releases it without spending an attempt",
        async () => {
          const log: string[] = [];
          const h = engine.harness();
          const { report, counts, again } = await withQueue(function* (queue) {
            const report = yield* shutdownScenario(queue, { drainMs: 1000, cleanupBudgetMs: 200 }, log);
            const counts = yield* queue.counts();
            // A released job comes back with the same attempt number.
            const taken: number[] = [];
            yield* scoped(function* again() {
              yield* useWorker(queue, function* handle(job) {
                taken.push(job.attempt);
              });
              yield* ended(queue, 3);
            });
            return { report, counts, again: taken };
          }, h);
          expect(log).toEqual([
            "start q#1 @0",
            "start s#1 @0",
            "stop @10",
            "done q @100",
            "finally q @100",
            "finally s @1010",
            "stopped @1010",
          ]);
          expect(report).toMatchObject({
            inFlightAtStop: 2,
            finishedInDrain: 1,
            released: 1,
            closeTimedOut: false,
            elapsedMs: 1000,
          });
          expect(report!.cutTree).toMatch(/\/s attempt 1\/5#\d+ running/);
          expect(counts).toMatchObject({ waiting: 2, active: 0, completed: 1, deadLettered: 0 });
          expect(again.sort()).toEqual([1, 1]);
          expect(
            h
              .eventsOf("worker:shutdown")
              .slice(0, 4)
              .map((e) => `${e.phase}@${e.at} ${e.inFlight}/${e.released}`),
          ).toEqual(["stop@10 2/0", "drained@1010 1/0", "cut@1010 0/1", "closed@1010 0/1"]);
          expect(jobEvents(h, "release")).toEqual(times(["s:release#1@1010"]));
        },
      );

      exact(
        "ends within drainMs + cleanup budget + close cap, even when a cut job's cleanup hangs and close hangs",
        async () => {
          const log: string[] = [];
          const h = engine.harness();
          const report = await withQueue(function* (queue) {
            const hanging: Queue<string> = { ...queue, engine: hangingClose(queue.engine) };
            let worker: Worker | null = null;
            const service = yield* spawn(function* service() {
              worker = yield* useWorker(
                hanging,
                function* handle() {
                  try {
                    yield* suspend();
                  } finally {
                    yield* suspend(); // a cleanup that never ends: cut by the cleanup budget
                  }
                },
                { drainMs: 500, cleanupBudgetMs: 300, closeCapMs: 200 },
              );
              yield* suspend();
            });
            yield* addThenStop(queue, service, log);
            return (worker as Worker | null)?.shutdownReport ?? null;
          }, h);
          expect(log).toEqual(["stop @5", "stopped @1005"]);
          expect(report).toMatchObject({ released: 1, closeTimedOut: true, elapsedMs: 1000 });
          expect(h.eventsOf("worker:shutdown").at(-1)?.phase).toBe("close-timeout");
        },
      );

      exact("with no cleanupBudgetMs, a cut job gets the runtime's cleanup budget", async () => {
        const h = engine.harness();
        const log: string[] = [];
        const task = h.run(
          function* test() {
            const queue = yield* engine.open<string>(`contract-${Math.random().toString(36).slice(2, 8)}`);
            const service = yield* spawn(function* service() {
              yield* useWorker(
                queue,
                function* handle() {
                  try {
                    yield* suspend();
                  } finally {
                    yield* suspend(); // a cleanup that never ends: cut by the runtime's budget
                  }
                },
                { drainMs: 500, closeCapMs: 200 },
              );
              yield* suspend();
            });
            yield* addThenStop(queue, service, log);
          },
          { cleanupBudgetMs: 300 },
        );
        await task;
        await h.expectClean();
        // 500 ms of drain, then the cut job's 300 ms (not the worker's former 5,000 ms default).
        expect(log).toEqual(["stop @5", "stopped @805"]);
      });

      exact(
        "a cut job whose handler swallows Cancelled and returns ends completed, once: never also released",
        async () => {
          const log: string[] = [];
          const h = engine.harness();
          const { report, counts } = await withQueue(function* (queue) {
            let worker: Worker | null = null;
            const service = yield* spawn(function* service() {
              worker = yield* useWorker(
                queue,
                function* handle(job) {
                  try {
                    yield* suspend();
                  } catch (error) {
                    // The shutdown's cut, swallowed: within the cleanup budget its work goes on.
                    if (!isCancelled(error)) throw error;
                    yield* sleep(20);
                    log.push(`swallowed ${job.id} @${yield* nowMs()}`);
                  }
                },
                { drainMs: 500, cleanupBudgetMs: 300 },
              );
              yield* suspend();
            });
            yield* addThenStop(queue, service, log);
            const report = (worker as Worker | null)?.shutdownReport ?? null;
            return { report, counts: yield* queue.counts() };
          }, h);
          expect(log).toEqual(["stop @5", "swallowed h @525", "stopped @525"]);
          expect(report).toMatchObject({ inFlightAtStop: 1, finishedInDrain: 0, released: 0 });
          expect(counts).toMatchObject({ waiting: 0, active: 0, completed: 1, deadLettered: 0 });
          expect(jobEvents(h).filter((e) => !e.includes(":start"))).toEqual(times(["h:complete#1@525"]));
          // The delivery's task still ends cancelled, and the swallow is reported (semantics §5).
          expect(h.eventsOf("cleanup:swallow").length).toBeGreaterThan(0);
        },
      );

      it("a job taken but not yet started when the shutdown begins is released, never run", async () => {
        const ran: string[] = [];
        const counts = await withQueue(function* (queue) {
          yield* queue.add("x", { id: "a" });
          const service = yield* spawn(function* service() {
            yield* useWorker(queue, function* handle(job) {
              ran.push(job.id);
            });
            yield* suspend();
          });
          // Cancel in the same turn the worker takes the job: its task never begins.
          for (let i = 0; i < 3; i++) yield* sleep(0);
          yield* service.cancel();
          return yield* queue.counts();
        });
        expect(ran.length + counts.waiting).toBe(1);
        expect(counts.active).toBe(0);
      });
    });

    describe("stats and events", () => {
      exact("stats count every outcome, and every transition is an event", async () => {
        const h = engine.harness();
        const stats = await withQueue(function* (queue) {
          const worker = yield* useWorker(
            queue,
            function* handle(job) {
              yield* sleep(Number(job.id.slice(1)));
              if (job.data === "reject") throw new TypeError("no");
              if (job.data === "flaky" && job.attempt === 1) throw unavailable();
            },
            { concurrency: 4, retry: { backoff: constant(10) } },
          );
          yield* queue.add("ok", { id: "j10" });
          yield* queue.add("ok", { id: "j20" });
          yield* queue.add("flaky", { id: "j30" });
          yield* queue.add("reject", { id: "j40" });
          yield* queue.add("late", { id: "j50", ttlMs: 0 });
          yield* ended(queue, 5);
          return yield* worker.stats();
        }, h);
        expect(stats).toMatchObject({
          completed: 3,
          retried: 1,
          deadLettered: { expired: 1, exhausted: 0, rejected: 1, stalled: 0, abandoned: 0 },
          released: 0,
          inFlight: 0,
          waiting: 0,
          durationMs: { p50: 20, p99: 30 },
        });
        expect(jobEvents(h).sort()).toEqual(
          [
            "j10:start#1@0",
            "j10:complete#1@10",
            "j20:start#1@0",
            "j20:complete#1@20",
            "j30:start#1@0",
            "j30:retry(error)#1@30",
            "j30:start#2@40",
            "j30:complete#2@70",
            "j40:start#1@0",
            "j40:dead-letter(rejected)#1@40",
            "j50:dead-letter(expired)#1@10",
          ].sort(),
        );
      });
    });

    describe("the queue", () => {
      it("an id is an idempotency key: waiting, active or ended, adding it again adds nothing and says where that job stands; an ended job's record is kept", async () => {
        const { results, counts, dead } = await withQueue(function* (queue) {
          const r = [yield* queue.add("a", { id: "x" }), yield* queue.add("b", { id: "x" })];
          let release = false;
          yield* useWorker(queue, function* handle(job) {
            while (!release) yield* sleep(engine.pollMs);
            if (job.data === "bad") throw new TypeError("bad payload");
          });
          while ((yield* queue.counts()).active < 1) yield* sleep(engine.pollMs);
          r.push(yield* queue.add("c", { id: "x" })); // active
          release = true;
          yield* ended(queue, 1);
          r.push(yield* queue.add("d", { id: "x" })); // completed
          r.push(yield* queue.add("bad", { id: "y" }));
          yield* ended(queue, 2);
          r.push(yield* queue.add("e", { id: "y" })); // dead-lettered
          yield* sleep(5 * engine.pollMs);
          return {
            results: r.map((x) => `${x.id}:${x.added}:${x.state}`),
            counts: yield* queue.counts(),
            dead: yield* queue.deadLetters(),
          };
        });
        expect(results).toEqual([
          "x:true:waiting",
          "x:false:waiting",
          "x:false:active",
          "x:false:completed",
          "y:true:waiting",
          "y:false:dead-lettered",
        ]);
        expect(counts).toMatchObject({ waiting: 0, active: 0, completed: 1, deadLettered: 1 });
        expect(dead.map((l) => `${l.id} ${l.data} ${l.reason}`)).toEqual(["y bad rejected"]);
      });

      exact("runs jobs by priority (lower first), then in order, and not before their delay", async () => {
        const order: string[] = [];
        await withQueue(function* (queue) {
          yield* queue.add("p2", { priority: 2 });
          yield* queue.add("p0-a");
          yield* queue.add("p1", { priority: 1 });
          yield* queue.add("p0-b");
          yield* queue.add("delayed", { delayMs: 500 });
          yield* useWorker(queue, function* handle(job) {
            order.push(`${job.data}@${yield* nowMs()}`);
          });
          yield* ended(queue, 5);
        });
        expect(order).toEqual(["p0-a@0", "p0-b@0", "p1@0", "p2@0", "delayed@500"]);
      });
    });
  });
}

const nowMs = now;

const treeOf = (task: Task<unknown>) => formatTaskTree(snapshot(task));

/** A proxy of `engine` whose `close` never ends (BullMQ's can hang: its issue #4656). */
function hangingClose<T>(engine: QueueEngine<T>): QueueEngine<T> {
  return new Proxy(engine, {
    get(target, key) {
      if (key === "close") return () => suspend();
      const v = Reflect.get(target, key);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}
