/**
 * One delivery of a job: its handler under the deadline `min(job deadline, now + timeoutMs)`, a
 * stall watchdog, and the one outcome it ends with (completed, retried, dead-lettered, released).
 * @module
 */
import {
  emitEvent,
  eventsWanted,
  isCancelled,
  isTimeoutError,
  type Operation,
  random,
  sleep,
  spawn,
  type Task,
  timeout,
  timeoutAt,
} from "@keel/core";
import { invalidType } from "./checks.js";
import type { DeadLetterReason, EngineJob, JobAttempt } from "./engine.js";
import { JobCancelledError, JobExpiredError, JobStalledError } from "./errors.js";
import { Bound } from "./op.js";
import type { Delivery, Pool } from "./pool.js";
import { safeThrown } from "./thrown.js";
import type { Job } from "./worker.js";

/**
 * The delivery's task: the handler under `min(job deadline, now + timeoutMs)`, then the one outcome.
 * A cut (the shutdown's, the stall watchdog's, the engine's own cancellation) cancels this task
 * while its handler runs: the outcome is then settled as the task unwinds, within the worker's
 * cleanup budget (its slot's).
 */
export function* deliver<T>(
  pool: Pool<T>,
  d: Delivery<T>,
  attempts: number,
): Generator<unknown, void, unknown> {
  d.started = true;
  try {
    const { engine, config, clock } = pool;
    const job = d.job;
    const startedAt = clock.now();
    if (d.cut === "released") {
      // Cut by the shutdown before it began: put back, never run.
      return yield* settle(pool, d, CUT, startedAt, startedAt, attempts);
    }
    if (job.deadlineAt <= startedAt) {
      // A job already expired when taken is not run.
      const error = new JobExpiredError(engine.name, job.id, job.deadlineAt, startedAt);
      return yield* deadLetter(pool, job, "expired", error, job.history);
    }
    d.lastProgressAt = startedAt;
    const until = Math.min(job.deadlineAt, startedAt + config.timeoutMs);
    // Asked once per delivery, so a delivery reports both its start and its completion or neither
    // (as a timeout scope does): with nobody listening, the two transitions every job makes build
    // no event (~0.7 µs per job on the embedded queue). The rarer ones (retry, dead letter,
    // release) always emit.
    const base = (yield* eventsWanted()) ? baseOf(engine.name, job) : null;
    if (base)
      yield* emitEvent({
        ...base,
        transition: "start",
        attempts,
        deadlineLeftMs: Math.max(0, until - startedAt),
      });
    // From here a cut cancels this task: it is delivered in the handler (or at the watchdog's spawn).
    d.running = true;
    const onCancel =
      engine.onCancel &&
      ((reason: string) => {
        d.cancelReason = reason;
        cut(d, "cancelled", `${engine.name}/${job.id}: cancelled through the queue (${reason})`);
      });
    if (onCancel) engine.onCancel?.(job, onCancel);
    let watchdog: Task<void> | null = null;
    let failed: Failed | null = null;
    try {
      if (config.stallMs !== Infinity)
        watchdog = yield* spawn(new Bound(watchStall<T>, pool, d, undefined), { name: "stall watchdog" });
      const view = new JobView(pool, d, attempts);
      // A job added with no deadline: only the worker's own `timeoutMs` bounds it (`warnNoDeadline`
      // says so, as for an HTTP call bounded only by the client's default total).
      if (job.deadlineAt === Infinity)
        yield* emitEvent({ type: "deadline:missing", call: "job", label: d.task?.name ?? job.id });
      yield* underDeadline(pool, view, until);
    } catch (error) {
      d.running = false;
      if (onCancel) engine.onCancel?.(job, null);
      const thrown = safeThrown(error, engine.name, job.id);
      if (!isCancelled(thrown)) failed = { ok: false, error: thrown };
      else {
        // A cut settles its outcome while the task unwinds; a cancellation that is not a cut (the
        // worker torn down without its shutdown) settles nothing: the engine still holds the job.
        if (d.cut !== null) yield* settle(pool, d, { ok: false, error }, startedAt, until, attempts);
        throw error;
      }
    }
    d.running = false;
    if (onCancel) engine.onCancel?.(job, null);
    if (watchdog) yield* watchdog.cancel();
    if (failed) return yield* settle(pool, d, failed, startedAt, until, attempts);
    // Completed: the common outcome, settled here rather than in `settle` (one generator less).
    const endedAt = clock.now();
    yield* engine.complete(job, pool.taking);
    pool.counters.completed++;
    pool.counters.recordDuration(endedAt - startedAt);
    if (base) yield* emitEvent({ ...base, transition: "complete", durationMs: endedAt - startedAt });
  } catch (error) {
    if (isCancelled(error)) throw error;
    // Outside the handler (an engine call, the dead-letter sink): the worker fails with it, after
    // its shutdown has drained the other deliveries. This job stays where the engine has it.
    pool.fail(error);
  } finally {
    pool.end(d);
  }
}

/** What every `worker:job` event of `job`'s delivery carries. */
function baseOf<T>(queue: string, job: EngineJob<T>) {
  return { type: "worker:job", queue, jobId: job.id, attempt: job.attempt } as const;
}

/** Cuts `d`'s handler, if it still runs: cancels the delivery's task, which settles as it unwinds. */
export function cut<T>(d: Delivery<T>, why: "released" | "stalled" | "cancelled", message: string): void {
  d.cut ??= why;
  if (d.running) d.task?.cancel(message);
}

/** The job as its handler sees it. */
class JobView<T> implements Job<T> {
  readonly id: string;
  readonly data: T;
  readonly attempt: number;
  readonly deadline: number;
  readonly queue: string;
  readonly #pool: Pool<T>;
  readonly #delivery: Delivery<T>;

  constructor(
    pool: Pool<T>,
    d: Delivery<T>,
    readonly attempts: number,
  ) {
    this.id = d.job.id;
    this.data = d.job.data;
    this.attempt = d.job.attempt;
    this.deadline = d.job.deadlineAt;
    this.queue = pool.engine.name;
    this.#pool = pool;
    this.#delivery = d;
  }

  progress(value: unknown): Operation<void> {
    return new Bound(reportProgress<T>, this.#pool, this.#delivery, value);
  }
}

function* reportProgress<T>(
  pool: Pool<T>,
  d: Delivery<T>,
  value: unknown,
): Generator<unknown, void, unknown> {
  d.lastProgressAt = pool.clock.now();
  yield* pool.engine.progress(d.job, value);
}

type Failed = { ok: false; error: unknown };
const CUT: Failed = { ok: false, error: undefined };

/** The handler's operation under the delivery's deadline. */
function underDeadline<T>(pool: Pool<T>, job: Job<T>, until: number): Operation<unknown> {
  const op = pool.handler(job);
  if (typeof (op as Operation<unknown> | null)?.[Symbol.iterator] !== "function")
    throw invalidType(
      `useWorker(queue, handler): handler(job) for ${job.queue}/${job.id}`,
      "an operation",
      op,
    );
  // `timeout(ms)` when the worker's own timeout is the nearer (the common case): its label formats
  // a whole number, where `timeoutAt`'s formats an instant (a fractional epoch on the real clock).
  return until === job.deadline ? timeoutAt(until, op) : timeout(pool.config.timeoutMs, op);
}

function* watchStall<T>(pool: Pool<T>, d: Delivery<T>): Generator<unknown, void, unknown> {
  const { clock, config } = pool;
  for (;;) {
    const quietMs = clock.now() - d.lastProgressAt;
    if (quietMs >= config.stallMs) break;
    yield* sleep(config.stallMs - quietMs);
  }
  cut(d, "stalled", `${pool.engine.name}/${d.job.id}: no progress for ${config.stallMs} ms`);
}

/** A delivery's outcome other than completed. */
function* settle<T>(
  pool: Pool<T>,
  d: Delivery<T>,
  outcome: Failed,
  startedAt: number,
  until: number,
  attempts: number,
): Generator<unknown, void, unknown> {
  const { engine, config, clock, counters } = pool;
  const job = d.job;
  const endedAt = clock.now();
  const base = baseOf(engine.name, job);
  if (d.cut === "released") {
    yield* engine.release(job);
    counters.released++;
    return yield* emitEvent({ ...base, transition: "release" });
  }
  if (d.cut === "cancelled") {
    const error = new JobCancelledError(engine.name, job.id, d.cancelReason ?? "cancelJob");
    const history = [...job.history, { attempt: job.attempt, startedAt, endedAt, error }];
    return yield* deadLetter(pool, job, "rejected", error, history);
  }
  let error = d.cut === "stalled" ? new JobStalledError(engine.name, job.id, config.stallMs) : outcome.error;
  const failed: JobAttempt = { attempt: job.attempt, startedAt, endedAt, error };
  const history = [...job.history, failed];
  if (endedAt >= job.deadlineAt) {
    error = new JobExpiredError(engine.name, job.id, job.deadlineAt, endedAt, { cause: error });
    return yield* deadLetter(pool, job, "expired", error, history);
  }
  const firstStartedAt = job.history[0]?.startedAt ?? startedAt;
  const info = {
    attempt: job.attempt,
    elapsedMs: endedAt - firstStartedAt,
    timedOut: isTimeoutError(error) && endedAt >= until,
  };
  if (!config.retryOn(error, info)) return yield* deadLetter(pool, job, "rejected", error, history);
  if (job.attempt >= attempts) return yield* deadLetter(pool, job, "exhausted", error, history);
  const delayMs = yield* delayFor(pool, job, error);
  if (endedAt + delayMs >= Math.min(job.deadlineAt, firstStartedAt + config.budgetMs))
    // A redelivery that could only start past the deadline or the budget is not scheduled.
    return yield* deadLetter(pool, job, "exhausted", error, history);
  yield* engine.retry(job, { delayMs, error, startedAt, endedAt });
  counters.retried++;
  yield* emitEvent({ ...base, transition: "retry", reason: d.cut ?? "error", delayMs, error });
}

function* delayFor<T>(pool: Pool<T>, job: EngineJob<T>, error: unknown): Generator<unknown, number, unknown> {
  const retryAfterMs = (error as { retryAfterMs?: unknown } | null)?.retryAfterMs;
  if (typeof retryAfterMs === "number" && Number.isFinite(retryAfterMs) && retryAfterMs >= 0)
    return retryAfterMs;
  const last = job.history[job.history.length - 1];
  const state =
    last === undefined ? undefined : { attempt: job.history.length, previousMs: last.delayMs ?? 0 };
  const r = yield* random();
  return pool.config.backoff.next(state, () => r).delayMs;
}

function* deadLetter<T>(
  pool: Pool<T>,
  job: EngineJob<T>,
  reason: DeadLetterReason,
  error: unknown,
  history: readonly JobAttempt[],
): Generator<unknown, void, unknown> {
  yield* pool.engine.deadLetter(job, { reason, error, history }, pool.taking);
  pool.counters.deadLettered[reason]++;
  yield* emitEvent({ ...baseOf(pool.engine.name, job), transition: "dead-letter", reason, error });
  const sink = pool.config.deadLetter;
  if (sink) yield* sink({ id: job.id, data: job.data, reason, error, history, at: pool.clock.now() });
}
