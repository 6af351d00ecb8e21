/**
 * How a delivery's job ends: the outcome decided (completed, retried, dead-lettered, released) and
 * recorded with the engine under a bound. A call the engine does not answer within
 * `engineTimeoutMs` (retried while the bound lasts, once the engine answers again), or one that
 * finds the job no longer this process's, ends the delivery as `stalled`: the engine's own recovery
 * puts the job back (BullMQ's stalled check, once its lock lapses).
 * @module
 */
import {
  describeThrown,
  emitEvent,
  eventsWanted,
  isCancelled,
  isTimeoutError,
  KeelError,
  type Operation,
  random,
} from "@keel/core";
import type { DeadLetterReason, EngineJob, JobAttempt } from "./engine.js";
import { isJobLockLostError, JobAbandonedError, JobLockLostError } from "./engine-errors.js";
import { JobCancelledError, JobExpiredError, JobStalledError } from "./errors.js";
import { Sync } from "./op.js";
import type { JobAttemptInfo } from "./options.js";
import type { Delivery, Pool } from "./pool.js";

/** What every `worker:job` event of `job`'s delivery carries. */
export function baseOf<T>(queue: string, job: EngineJob<T>) {
  return { type: "worker:job", queue, jobId: job.id, attempt: job.attempt } as const;
}

export type Failed = { ok: false; error: unknown };

/** Completed: the common outcome (for the embedded engine: a closure and no wait beyond its call). */
export function* complete<T>(
  pool: Pool<T>,
  d: Delivery<T>,
  base: ReturnType<typeof baseOf> | null,
): Generator<unknown, void, unknown> {
  if (!pool.claim(d)) return;
  const { engine, counters, clock } = pool;
  const endedAt = clock.now();
  const job = d.job;
  if (!(yield* record(pool, d, "complete", () => engine.complete(job, d.value, pool.taking)))) return;
  counters.completed++;
  counters.recordDuration(endedAt - d.startedAt);
  if (base) yield* emitEvent({ ...base, transition: "complete", durationMs: endedAt - d.startedAt });
}

/**
 * Records an ending call with the engine: at once for a call that cannot wait (the embedded
 * engine's; its failure is a defect and is thrown), else under `engineTimeoutMs`, made again
 * (`make` builds it afresh: an engine's operation may hold a promise already settled) once the
 * engine answers while that bound lasts. False when it could not be recorded: the delivery was
 * reported `stalled`.
 */
export function* record<T>(
  pool: Pool<T>,
  d: Delivery<T>,
  what: string,
  make: () => Operation<void>,
): Generator<unknown, boolean, unknown> {
  try {
    return yield* recordOnce(pool, d, what, make);
  } catch (e) {
    // Cut while recording (a delivery past its cleanup budget, whose every wait now throws): the
    // claim is given back, and its slot (or the shutdown) ends the job instead.
    if (isCancelled(e)) d.settled = false;
    throw e;
  }
}

function* recordOnce<T>(
  pool: Pool<T>,
  d: Delivery<T>,
  what: string,
  make: () => Operation<void>,
): Generator<unknown, boolean, unknown> {
  let op: Operation<void>;
  try {
    op = make();
  } catch (e) {
    if (isJobLockLostError(e)) return yield* stalled(pool, d, "lock-lost", e);
    throw e;
  }
  if (op instanceof Sync) {
    yield* op;
    return true;
  }
  const { health, config, clock, engine } = pool;
  const job = d.job;
  // A shutdown does not wait on an engine known to be down: the job is left to its recovery.
  if (health.down && !pool.taking) return yield* stalled(pool, d, "engine-down", health.reading().error);
  const by = clock.now() + config.engineTimeoutMs;
  for (let attempt = 0; ; attempt++) {
    try {
      yield* health.call(`${what} ${job.id}`, attempt === 0 ? op : make());
      return true;
    } catch (e) {
      if (isCancelled(e)) throw e;
      if (isJobLockLostError(e)) return yield* stalled(pool, d, "lock-lost", e);
      if (clock.now() >= by) return yield* stalled(pool, d, "engine-down", e);
      yield* health.whenUp(`${engine.name}/${job.id}: recording ${what}, waiting for the engine`, by);
      if (health.down) return yield* stalled(pool, d, "engine-down", e);
    }
  }
}

/** The job could not be ended here: the engine gets it back by its own recovery. */
function* stalled<T>(
  pool: Pool<T>,
  d: Delivery<T>,
  reason: "lock-lost" | "engine-down",
  error: unknown,
): Generator<unknown, false, unknown> {
  pool.engine.forget?.(d.job);
  pool.counters.stalled++;
  yield* emitEvent({ ...baseOf(pool.engine.name, d.job), transition: "stalled", reason, error });
  return false;
}

/** A delivery's outcome other than completed. */
export function* settle<T>(
  pool: Pool<T>,
  d: Delivery<T>,
  outcome: Failed,
  until: number,
  attempts: number,
): Generator<unknown, void, unknown> {
  if (!pool.claim(d)) return;
  const { engine, config, clock } = pool;
  const job = d.job;
  const startedAt = d.startedAt;
  const endedAt = clock.now();
  if (d.cut === "lost")
    return void (yield* stalled(
      pool,
      d,
      "lock-lost",
      new JobLockLostError(engine.name, job.id, "its lock lapsed"),
    ));
  if (d.cut === "released") return yield* release(pool, d);
  if (d.cut === "cancelled") {
    const error = new JobCancelledError(engine.name, job.id, d.cancelReason ?? "cancelJob");
    const history = [...job.history, { attempt: job.attempt, startedAt, endedAt, error }];
    return yield* deadLetter(pool, d, "rejected", error, history);
  }
  let error = d.cut === "stalled" ? new JobStalledError(engine.name, job.id, config.stallMs) : outcome.error;
  const failed: JobAttempt = { attempt: job.attempt, startedAt, endedAt, error };
  const history = [...job.history, failed];
  if (endedAt >= job.deadlineAt) {
    error = new JobExpiredError(engine.name, job.id, job.deadlineAt, endedAt, { cause: error });
    return yield* deadLetter(pool, d, "expired", error, history);
  }
  const firstStartedAt = job.history[0]?.startedAt ?? startedAt;
  const info = {
    attempt: job.attempt,
    elapsedMs: endedAt - firstStartedAt,
    timedOut: isTimeoutError(error) && endedAt >= until,
  };
  const retry = retries(config.retryOn, error, info, engine.name, job.id);
  if (retry !== true) return yield* deadLetter(pool, d, "rejected", retry || error, history);
  if (job.attempt >= attempts) return yield* deadLetter(pool, d, "exhausted", error, history);
  const delayMs = yield* delayFor(pool, job, error);
  if (endedAt + delayMs >= Math.min(job.deadlineAt, firstStartedAt + config.budgetMs))
    // A redelivery that could only start past the deadline or the budget is not scheduled.
    return yield* deadLetter(pool, d, "exhausted", error, history);
  const retried = { delayMs, error, startedAt, endedAt };
  if (!(yield* record(pool, d, "retry", () => engine.retry(job, retried)))) return;
  pool.counters.retried++;
  yield* emitEvent({
    ...baseOf(engine.name, job),
    transition: "retry",
    reason: d.cut ?? "error",
    delayMs,
    error,
  });
}

/**
 * Ends the job of a delivery whose task ended without doing so (its slot calls this): a cut one,
 * as its cut says (or completed, when its handler returned anyway, or as the error it threw);
 * one the runtime abandoned (its handler swallowed `Cancelled` and went on), released when the cut
 * was the shutdown's, else dead-lettered as `abandoned`.
 */
export function* endAfterCut<T>(
  pool: Pool<T>,
  d: Delivery<T>,
  attempts: number,
): Generator<unknown, void, unknown> {
  if (!d.unwound) return yield* settleAbandoned(pool, d);
  if (d.result === "returned") {
    const wanted = yield* eventsWanted();
    return yield* complete(pool, d, wanted ? baseOf(pool.engine.name, d.job) : null);
  }
  yield* settle(pool, d, d.result ?? CUT, d.until, attempts);
}

const CUT: Failed = { ok: false, error: undefined };

function* settleAbandoned<T>(pool: Pool<T>, d: Delivery<T>): Generator<unknown, void, unknown> {
  if (!pool.claim(d)) return;
  const { engine, clock } = pool;
  const job = d.job;
  if (d.cut === "released" || !pool.taking) return yield* release(pool, d);
  if (d.cut === "lost")
    return void (yield* stalled(
      pool,
      d,
      "lock-lost",
      new JobLockLostError(engine.name, job.id, "its lock lapsed"),
    ));
  const error = new JobAbandonedError(engine.name, job.id, d.cut ?? "its deadline");
  const history = [
    ...job.history,
    { attempt: job.attempt, startedAt: d.startedAt, endedAt: clock.now(), error },
  ];
  yield* deadLetter(pool, d, "abandoned", error, history);
}

/** Puts the job back without spending its attempt (the shutdown's cut). */
export function* release<T>(pool: Pool<T>, d: Delivery<T>): Generator<unknown, void, unknown> {
  if (!(yield* record(pool, d, "release", () => pool.engine.release(d.job)))) return;
  pool.counters.released++;
  yield* emitEvent({ ...baseOf(pool.engine.name, d.job), transition: "release" });
}

/**
 * The user's `retryOn`: true to retry, false not to; one that throws refuses the retry too (the job
 * is dead-lettered, never the worker failed), and gives the dead letter's error: what it threw,
 * described, with the handler's error as its cause.
 */
function retries(
  retryOn: (error: unknown, info: JobAttemptInfo) => boolean,
  error: unknown,
  info: JobAttemptInfo,
  queue: string,
  jobId: string,
): boolean | KeelError {
  try {
    return Boolean(retryOn(error, info));
  } catch (thrown) {
    const message = `${queue}/${jobId}: retryOn threw ${describeThrown(thrown)}; the job is not retried`;
    return new KeelError("KEEL_RETRY_ON_THREW", message, { cause: error });
  }
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

export function* deadLetter<T>(
  pool: Pool<T>,
  d: Delivery<T>,
  reason: DeadLetterReason,
  error: unknown,
  history: readonly JobAttempt[],
): Generator<unknown, void, unknown> {
  const job = d.job;
  const letter = { reason, error, history };
  if (!(yield* record(pool, d, "deadLetter", () => pool.engine.deadLetter(job, letter, pool.taking)))) return;
  pool.counters.deadLettered[reason]++;
  yield* emitEvent({ ...baseOf(pool.engine.name, job), transition: "dead-letter", reason, error });
  const sink = pool.config.deadLetter;
  if (sink) yield* sink({ id: job.id, data: job.data, reason, error, history, at: pool.clock.now() });
}
