/**
 * `useWorker`: a resource that runs a queue's jobs until its scope ends, then shuts down within a
 * bound: stop taking, drain, cut and release, close.
 * @module
 */
import {
  all,
  cleanupBudget,
  emitEvent,
  formatTaskTree,
  isCancelled,
  type Operation,
  race,
  resource,
  sleep,
  snapshot,
  useClock,
  withCleanupBudget,
} from "@keel/core";
import { invalidType } from "./checks.js";
import { cut as cutDelivery } from "./delivery.js";
import type { EngineJob } from "./engine.js";
import { Bound } from "./op.js";
import { checkWorkerOptions, type WorkerOptions } from "./options.js";
import { release } from "./outcome.js";
import { type Delivery, type Handler, newDelivery, Pool } from "./pool.js";
import type { Queue } from "./queue.js";
import { useSlots } from "./slots.js";
import type { ShutdownReport, WorkerStats } from "./stats.js";

/**
 * A job as its handler sees it.
 *
 * @example
 * ```ts
 * import { remaining, run } from "@keel/core";
 * import { createMemoryQueue, type Job, useWorker } from "@keel/worker";
 * import { createVirtualClock } from "@keel/testing";
 * const seen: string[] = [];
 * await run(function* () {
 *   const queue = yield* createMemoryQueue<string>({ name: "mail" });
 *   yield* queue.add("hi", { id: "m1", ttlMs: 60_000 });
 *   yield* useWorker(queue, function* send(job: Job<string>) {
 *     yield* job.progress(50);
 *     seen.push(`${job.queue}/${job.id} attempt ${job.attempt}/${job.attempts}, ${yield* remaining()} ms left`);
 *   }, { timeoutMs: 1000 });
 *   while ((yield* queue.counts()).completed < 1) yield* queue.idle();
 * }, { clock: createVirtualClock() });
 * console.log(seen); // ["mail/m1 attempt 1/5, 1000 ms left"]
 * ```
 */
export interface Job<T> {
  readonly id: string;
  readonly data: T;
  /** This delivery's number, 1-based. */
  readonly attempt: number;
  /** The job's attempt limit. */
  readonly attempts: number;
  /** The job's own deadline, absolute on the runtime's clock (`Infinity` when none). */
  readonly deadline: number;
  /** The queue's name. */
  readonly queue: string;
  /** Reports progress; also the heartbeat that `stallMs` watches. */
  progress(value: unknown): Operation<void>;
}

/**
 * A running worker: its counts now, and what its shutdown did once it has run.
 *
 * @example
 * ```ts
 * import { run } from "@keel/core";
 * import { createMemoryQueue, useWorker, type Worker } from "@keel/worker";
 * const completed = await run(function* () {
 *   const queue = yield* createMemoryQueue<number>({ name: "n" });
 *   const worker: Worker = yield* useWorker(queue, function* noop() {});
 *   yield* queue.add(1);
 *   while ((yield* worker.stats()).completed < 1) yield* queue.idle();
 *   return (yield* worker.stats()).completed;
 * });
 * console.log(completed); // 1
 * ```
 */
export interface Worker {
  stats(): Operation<WorkerStats>;
  /** What the shutdown did; null until it has run. */
  readonly shutdownReport: ShutdownReport | null;
}

/**
 * Runs `handler` for the jobs of `queue`, `concurrency` at a time, until the caller's scope ends.
 *
 * - Each delivery is a task named `queue/id attempt k/N`, in one of the worker's `concurrency` slots;
 *   its handler runs under the deadline `min(job deadline, now + timeoutMs)`: `remaining()` and
 *   every Keel timeout inside see it.
 * - Each job ends exactly once: completed; dead-lettered as `expired` (its deadline passed before or
 *   while it ran), `exhausted` (attempts, `retry.budgetMs` or the time before its deadline spent; the
 *   attempt history kept), `rejected` (an error `retryOn` refuses; a thrown value that is not a
 *   readable `Error` is carried as a `JobThrewError`), `stalled` (BullMQ: its deliveries stalled
 *   more than `maxStalls` times) or `abandoned` (a cut handler that did not end within the cleanup
 *   budget); or released at shutdown. A retryable failure is redelivered after the backoff (or the
 *   error's `retryAfterMs`), never past the job's deadline.
 * - A delivery whose outcome cannot be recorded (the engine gives no answer within
 *   `engineTimeoutMs`, or no longer holds the job for this process) ends `stalled`: counted in
 *   `stats().stalled`, a `worker:job` event, and the job left to the engine's own recovery.
 * - A job is taken only when a slot is free; `stallMs` cuts a delivery with no `job.progress` for that long.
 * - A job's `id` is an idempotency key: adding one that is held or has ended adds nothing.
 * - Every call to the engine is bounded by `engineTimeoutMs`; one that fails or runs past it marks
 *   the engine down (a `worker:engine` event, a warning): nothing is taken until it answers again.
 *   Down for longer than `engineDownMs`, the worker fails with `EngineUnavailableError`.
 *
 * **Cancellation** (the scope ends: `main`'s SIGTERM, a cancel, a parent's error): the worker stops
 * taking at once, lets in-flight jobs run for up to `drainMs`, then cancels the rest (each unwinds
 * within `cleanupBudgetMs`, and its slot then releases its job: not failed), releases at once what
 * is still running past that budget (counted in the report), and closes the engine; the releases and
 * the close are raced against `closeCapMs`, and skipped when the engine is down. The worker's
 * shutdown ends within `drainMs + cleanupBudgetMs + closeCapMs`, and the BullMQ queue's own close
 * after it within 1,000 ms: give `main` a `shutdownBudgetMs` of at least
 * `drainMs + cleanupBudgetMs + closeCapMs + 1,000`. It reports what it did (`onShutdown`,
 * `shutdownReport`, a `worker:shutdown` event per step). Every transition of a job is a `worker:job`
 * event.
 *
 * @example
 * ```ts
 * import { constant, run } from "@keel/core";
 * import { createMemoryQueue, useWorker } from "@keel/worker";
 * import { createVirtualClock } from "@keel/testing";
 * let calls = 0;
 * const stats = await run(function* () {
 *   const queue = yield* createMemoryQueue<string>({ name: "orders" });
 *   const worker = yield* useWorker(queue, function* ship(job) {
 *     if (++calls === 1) throw Object.assign(new Error("unavailable"), { status: 503 });
 *     return job.data;
 *   }, { concurrency: 4, timeoutMs: 5_000, retry: { attempts: 3, backoff: constant(100) } });
 *   yield* queue.add("o-1", { ttlMs: 60_000 });
 *   while ((yield* worker.stats()).completed < 1) yield* queue.idle();
 *   return yield* worker.stats();
 * }, { clock: createVirtualClock() });
 * console.log(stats.completed, stats.retried); // 1 1
 * ```
 * @throws `TypeError` for a `queue` that is not one, a `handler` that is not a function returning an
 * operation (an async function is refused), or an option of the wrong kind; `RangeError` for a bad
 * number (each message names the option).
 */
export function useWorker<T>(
  queue: Queue<T>,
  handler: (job: Job<T>) => Operation<unknown>,
  options: WorkerOptions<T> = {},
): Operation<Worker> {
  if (typeof (queue as Queue<T> | null)?.engine?.take !== "function")
    throw invalidType("useWorker(queue)", "a queue (createMemoryQueue, useBullQueue)", queue);
  if (typeof handler !== "function" || handler.constructor?.name === "AsyncFunction")
    throw invalidType(
      "useWorker(queue, handler)",
      "a function returning an operation (function* handler(job) { … }); wrap promise code with until()",
      handler,
    );
  const checked = checkWorkerOptions(options);
  const engine = queue.engine;
  return resource<Worker>(
    function* worker(provide) {
      // With no `cleanupBudgetMs`, a cut delivery gets the budget in force where the worker starts:
      // the runtime's (`run`/`main`'s `cleanupBudgetMs`), or a `withCleanupBudget` region's.
      const config = { ...checked, cleanupBudgetMs: checked.cleanupBudgetMs ?? (yield* cleanupBudget()) };
      // The worker's own unwinding holds the drain, the cut and the close.
      const shutdownMs = config.drainMs + config.cleanupBudgetMs + config.closeCapMs;
      yield* withCleanupBudget(shutdownMs + config.cleanupBudgetMs, function* worker() {
        const pool = new Pool<T>(engine, handler as Handler<T>, config, yield* useClock());
        yield* useSlots(pool);
        let report: ShutdownReport | null = null;
        try {
          yield* provide({
            stats: () => new Bound(stats<T>, pool, undefined, undefined),
            get shutdownReport() {
              return report;
            },
          });
        } finally {
          report = yield* shutdown(pool);
          config.onShutdown?.(report);
        }
      });
    },
    { name: `worker ${engine.name}` },
  );
}

function* stats<T>(pool: Pool<T>): Generator<unknown, WorkerStats, unknown> {
  // Never waits past `engineTimeoutMs`: with the engine down, `waiting` is the last reading.
  if (!pool.health.down)
    try {
      const c = yield* pool.health.call("counts", pool.engine.counts());
      pool.lastWaiting = c.waiting + c.delayed;
    } catch (e) {
      if (isCancelled(e)) throw e;
    }
  return pool.counters.snapshot(pool.inFlight.size, pool.lastWaiting, pool.health.reading());
}

function* shutdown<T>(pool: Pool<T>): Generator<unknown, ShutdownReport, unknown> {
  const { engine, config, clock, counters } = pool;
  const startedAt = clock.now();
  const releasedBefore = counters.released;
  const event = (phase: "stop" | "drained" | "cut" | "closed" | "close-timeout") =>
    emitEvent({
      type: "worker:shutdown",
      queue: engine.name,
      phase,
      inFlight: pool.inFlight.size,
      released: counters.released - releasedBefore,
    });
  // Stops taking at once: an idle slot ends now, a busy one once its delivery has ended.
  pool.stopTaking();
  const inFlightAtStop = pool.inFlight.size;
  yield* event("stop");
  yield* pool.settledBy(startedAt + config.drainMs, `${engine.name}: draining ${pool.inFlight.size} jobs`);
  const finishedInDrain = inFlightAtStop - pool.inFlight.size;
  yield* event("drained");
  let cutTree = "";
  if (pool.inFlight.size > 0) {
    const cut = [...pool.inFlight.values()];
    cutTree = cut
      .map((d) => (d.task ? formatTaskTree(snapshot(d.task)) : `${engine.name}/${d.job.id}`))
      .join("\n");
    // One not begun yet releases its job as it begins; one settling its outcome finishes it.
    for (const d of cut) cutDelivery(d, "released", `${engine.name}/${d.job.id}: released at shutdown`);
    yield* pool.settledBy(
      clock.now() + config.cleanupBudgetMs,
      `${engine.name}: releasing ${cut.length} jobs`,
    );
    yield* event("cut");
  }
  const closed = yield* race([
    function* close() {
      // A cut delivery still unwinding past its budget (or abandoned) has its job put back here,
      // counted and reported; whatever it does later ends nothing (`claim`). An outcome being
      // recorded finishes, within the cap.
      const ending = [...pool.inFlight].filter((d) => d.started && pool.claim(d));
      ending.push(...pool.orphans.splice(0).map(orphan));
      // At once, not one after another: each is bounded by `engineTimeoutMs`, together by the cap.
      if (ending.length > 0) yield* all(ending.map((d) => new Bound(releaseAtClose<T>, pool, d, undefined)));
      yield* pool.settledBy(Infinity, `${engine.name}: recording ${pool.inFlight.size} outcomes`);
      // An engine known to be down is not asked to close (it would only use up the cap): the
      // queue's own teardown drops its connections.
      if (pool.health.down) return false;
      // Jobs the engine fetched ahead for a take that never came (BullMQ: the one the last
      // completion fetched, or a blocking fetch that lands as the worker stops) go back too.
      const putBack = yield* engine.close();
      if (typeof putBack === "number") counters.released += putBack;
      return true;
    },
    function* cap() {
      yield* sleep(config.closeCapMs);
      return false;
    },
  ]);
  yield* event(closed ? "closed" : "close-timeout");
  return {
    inFlightAtStop,
    finishedInDrain,
    released: counters.released - releasedBefore,
    cutTree,
    closeTimedOut: !closed,
    elapsedMs: clock.now() - startedAt,
  };
}

function* releaseAtClose<T>(pool: Pool<T>, d: Delivery<T>): Generator<unknown, void, unknown> {
  yield* release(pool, d);
  pool.end(d);
}

/** A job taken whose delivery never began, as a delivery the shutdown releases (its end claimed). */
function orphan<T>(job: EngineJob<T>): Delivery<T> {
  return { ...newDelivery(job), cut: "released", settled: true, unwound: true };
}
