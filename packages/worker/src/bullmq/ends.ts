/**
 * How the BullMQ engine ends a job it holds, in BullMQ's own terms (what BullMQ's tools then show):
 * completed with the handler's value as its `returnvalue`; retried as BullMQ's own retry does it
 * (`attemptsMade` counts the attempt, `failedReason` and `stacktrace` say why); dead-lettered as
 * `failed` for good (BullMQ's `UnrecoverableError`, whatever the job's `attempts` say). Keel's own
 * record of a retry or a dead letter (the history, the reason) is merged into `opts.keel` first.
 * @module
 */
import { UnrecoverableError } from "bullmq";
import type { DeadLetterReason, EngineJob, JobAttempt } from "../engine.js";
import type { Held } from "./consumer.js";
import { clientOf, retryLater } from "./internals.js";
import { failedError, type KeelOpts, MERGE_KEEL, type StoredAttempt, storedError } from "./stored.js";

/**
 * Completes the job; the handler's value is its `returnvalue`. One JSON cannot hold (a BigInt, a
 * cycle: BullMQ's stringify throws before it calls Redis) is stored as null, as are `undefined`, a
 * function and a symbol (JSON has none of them).
 */
export function completeHeld<T>(h: Held<T>, value: unknown, fetchNext: boolean): Promise<unknown> {
  const v = value === undefined || typeof value === "function" || typeof value === "symbol" ? null : value;
  return h.job.moveToCompleted(v, h.token, fetchNext).catch((e: unknown) => {
    if (!(e instanceof TypeError)) throw e;
    return h.job.moveToCompleted(null, h.token, fetchNext);
  });
}

/** Records the failed attempt in the job's history and delays it by `delayMs`, one attempt spent. */
export function retryHeld<T>(
  h: Held<T>,
  job: EngineJob<T>,
  f: { delayMs: number; error: unknown; startedAt: number; endedAt: number },
): Promise<unknown> {
  // From this delivery's own view, not the job's options: a retry made again after a failed call
  // (the worker's `record`) writes the same record, never a second attempt.
  const error = storedError(f.error);
  const record: StoredAttempt = {
    attempt: job.attempt,
    startedAt: f.startedAt,
    endedAt: f.endedAt,
    error,
    delayMs: f.delayMs,
  };
  const history = [...(job.history as unknown as StoredAttempt[]), record];
  const failure = failedError(error, f.error);
  return moving(h, { history }, () =>
    retryLater(h.job, h.token, f.delayMs, {
      failedReason: failure.message,
      stacktrace: JSON.stringify(stacktrace(h, failure)),
    }),
  );
}

/** Fails the job for good, with Keel's reason, error and history in `opts.keel`. */
export function deadLetterHeld<T>(
  h: Held<T>,
  letter: { reason: DeadLetterReason; error: unknown; history: readonly JobAttempt[] },
  fetchNext: boolean,
): Promise<unknown> {
  const history = letter.history.map((a) => ({ ...a, error: storedError(a.error) }));
  const deadError = storedError(letter.error);
  // A job that stalled out keeps BullMQ's own reason (what BullMQ's tools and workers know).
  const e = h.job.deferredFailure
    ? new UnrecoverableError(h.job.deferredFailure)
    : failedError(deadError, letter.error);
  const keel: KeelOpts = { deadReason: letter.reason, deadError };
  if (history.length > 0) keel.history = history;
  return moving(h, keel, () => h.job.moveToFailed(e, h.token, fetchNext));
}

/**
 * Merges `keel` into the job's `opts.keel`, then makes BullMQ's call that moves the job: sent one
 * after the other on the worker's connection (Redis runs them in that order, in one round trip),
 * the merge only while this process holds the job's lock; BullMQ's call checks the same lock, and
 * its error (a lock lost, a job gone) is the one thrown.
 */
async function moving<T, R>(h: Held<T>, keel: KeelOpts, move: () => Promise<R>): Promise<R> {
  const { worker } = h.consumer;
  const client = await clientOf(worker);
  const merged = client.eval(MERGE_KEEL, 1, worker.toKey(h.job.id ?? ""), h.token, JSON.stringify(keel));
  const [code, result] = await Promise.all([merged, move()]);
  if (code !== 0) throw Object.assign(new Error(`Missing lock for job ${h.job.id}`), { code });
  return result;
}

/**
 * The job's `stacktrace` with this failure's stack pushed, as BullMQ's own failure keeps it (the
 * job's `stackTraceLimit` option, when set, keeps the last that many).
 */
function stacktrace<T>(h: Held<T>, e: Error): string[] {
  const limit = h.job.opts.stackTraceLimit;
  if (limit === 0) return [];
  const traces = [...(h.job.stacktrace ?? [])];
  if (e.stack) traces.push(e.stack);
  return typeof limit === "number" && limit > 0 ? traces.slice(-limit) : traces;
}
