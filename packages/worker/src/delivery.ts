/**
 * One delivery of a job: its handler under the deadline `min(job deadline, now + timeoutMs)`, a
 * stall watchdog, and the one outcome it ends with (completed, retried, dead-lettered, released).
 * @module
 */
import {
  emitEvent,
  isCancelled,
  isTimeoutError,
  type Operation,
  random,
  sleep,
  spawn,
  type Task,
  timeoutAt,
  withCleanupBudget,
} from "@keel/core";
import { invalidType } from "./checks.js";
import type { DeadLetterReason, EngineJob, JobAttempt } from "./engine.js";
import { JobCancelledError, JobExpiredError, JobStalledError } from "./errors.js";
import type { Delivery, Pool } from "./pool.js";
import type { Job } from "./worker.js";

/** The delivery's body, run shielded from the worker's own cancellation (the shutdown cuts it explicitly). */
export function* deliver<T>(pool: Pool<T>, d: Delivery<T>): Generator<unknown, void, unknown> {
  d.started = true;
  const { engine, config, clock } = pool;
  const job = d.job;
  const startedAt = clock.now();
  if (job.deadlineAt <= startedAt) {
    // A job already expired when taken is not run.
    const error = new JobExpiredError(engine.name, job.id, job.deadlineAt, startedAt);
    return yield* deadLetter(pool, job, "expired", error, job.history);
  }
  d.lastProgressAt = startedAt;
  const attempts = job.attempts ?? config.attempts;
  const until = Math.min(job.deadlineAt, startedAt + config.timeoutMs);
  yield* emitEvent({
    type: "worker:job",
    queue: engine.name,
    jobId: job.id,
    attempt: job.attempt,
    transition: "start",
    attempts,
    deadlineLeftMs: Math.max(0, until - startedAt),
  });
  const view = jobView(pool, d, attempts);
  const inner: Task<Outcome> = yield* spawn(
    withCleanupBudget(config.cleanupBudgetMs, () => attempt(until, pool, view)),
    { name: `${engine.name}/${job.id} attempt ${job.attempt}/${attempts}` },
  );
  d.inner = inner;
  if (d.cut) inner.cancel(`${engine.name}/${job.id}: released at shutdown`);
  const onAbort = () => {
    d.cut ??= "cancelled";
    const reason: unknown = job.signal?.reason;
    d.cancelReason = typeof reason === "string" ? reason : "cancelJob";
    inner.cancel(`${engine.name}/${job.id}: cancelled through the queue (${d.cancelReason})`);
  };
  if (job.signal?.aborted) onAbort();
  else job.signal?.addEventListener("abort", onAbort, { once: true });
  const watchdog =
    config.stallMs === Infinity ? null : yield* spawn(watchStall(pool, d, inner), { name: "stall watchdog" });
  let outcome: Outcome;
  try {
    outcome = yield* inner;
  } catch (error) {
    // Only a cut (the shutdown's or the watchdog's) ends the attempt cancelled.
    outcome = { ok: false, error };
  }
  job.signal?.removeEventListener("abort", onAbort);
  if (watchdog) yield* watchdog.cancel();
  yield* settle(pool, d, outcome, startedAt, until, attempts);
}

function jobView<T>(pool: Pool<T>, d: Delivery<T>, attempts: number): Job<T> {
  const { id, data, attempt, deadlineAt } = d.job;
  return {
    id,
    data,
    attempt,
    attempts,
    deadline: deadlineAt,
    queue: pool.engine.name,
    progress(value: unknown): Operation<void> {
      return {
        *[Symbol.iterator]() {
          d.lastProgressAt = pool.clock.now();
          yield* pool.engine.progress(d.job, value);
        },
      };
    },
  };
}

type Outcome = { ok: true } | { ok: false; error: unknown };

/**
 * The handler's task: its error becomes its value, so that a failed attempt does not fail the
 * delivery's scope (a child's error fails its owner); a cancellation still ends it cancelled.
 */
function* attempt<T>(until: number, pool: Pool<T>, job: Job<T>): Generator<unknown, Outcome, unknown> {
  // A job added with no deadline: only the worker's own `timeoutMs` bounds it (`warnNoDeadline`
  // says so, as for an HTTP call bounded only by the client's default total).
  if (job.deadline === Infinity) {
    const label = `${job.queue}/${job.id} attempt ${job.attempt}/${job.attempts}`;
    yield* emitEvent({ type: "deadline:missing", call: "job", label });
  }
  try {
    yield* timeoutAt(until, () => callHandler(pool, job));
    return { ok: true };
  } catch (error) {
    if (isCancelled(error)) throw error;
    return { ok: false, error };
  }
}

function* callHandler<T>(pool: Pool<T>, job: Job<T>): Generator<unknown, unknown, unknown> {
  const op = pool.handler(job);
  if (typeof (op as Operation<unknown> | null)?.[Symbol.iterator] !== "function")
    throw invalidType(
      `useWorker(queue, handler): handler(job) for ${job.queue}/${job.id}`,
      "an operation",
      op,
    );
  return yield* op;
}

function* watchStall<T>(
  pool: Pool<T>,
  d: Delivery<T>,
  inner: Task<unknown>,
): Generator<unknown, void, unknown> {
  const { clock, config } = pool;
  for (;;) {
    const quietMs = clock.now() - d.lastProgressAt;
    if (quietMs >= config.stallMs) break;
    yield* sleep(config.stallMs - quietMs);
  }
  d.cut ??= "stalled";
  inner.cancel(`${pool.engine.name}/${d.job.id}: no progress for ${config.stallMs} ms`);
}

function* settle<T>(
  pool: Pool<T>,
  d: Delivery<T>,
  outcome: Outcome,
  startedAt: number,
  until: number,
  attempts: number,
): Generator<unknown, void, unknown> {
  const { engine, config, clock, counters } = pool;
  const job = d.job;
  const endedAt = clock.now();
  const base = { type: "worker:job", queue: engine.name, jobId: job.id, attempt: job.attempt } as const;
  if (outcome.ok) {
    yield* engine.complete(job);
    counters.completed++;
    counters.recordDuration(endedAt - startedAt);
    return yield* emitEvent({ ...base, transition: "complete", durationMs: endedAt - startedAt });
  }
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
  yield* pool.engine.deadLetter(job, { reason, error, history });
  pool.counters.deadLettered[reason]++;
  yield* emitEvent({
    type: "worker:job",
    queue: pool.engine.name,
    jobId: job.id,
    attempt: job.attempt,
    transition: "dead-letter",
    reason,
    error,
  });
  const sink = pool.config.deadLetter;
  if (sink) yield* sink({ id: job.id, data: job.data, reason, error, history, at: pool.clock.now() });
}
