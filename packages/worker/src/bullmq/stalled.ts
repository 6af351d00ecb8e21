/**
 * Jobs that stalled out (`maxStalls`). BullMQ 6.7's stalled check does not fail a job that stalled
 * more than `maxStalledCount` times: it marks it with a deferred failure ("job stalled more than
 * allowable limit") and puts it back to wait, for the next worker that fetches it to fail it
 * unrun, as BullMQ's own loop does (`processJob`). The engine fetches by hand, so it must do that
 * itself at `take`, or a job that kills its process is delivered forever. A failed job reads back
 * as a Keel dead letter: reason and error as the worker stored them, or, for BullMQ's stalled
 * failure, `stalled` with a `JobStalledOutError`.
 * @module
 */
import { emitEvent, isCancelled, timeout, until } from "@keel/core";
import { type Job as BullJob, UnrecoverableError } from "bullmq";
import type { DeadLetterReason } from "../engine.js";
import { JobStalledOutError } from "../errors.js";
import type { Held } from "./consumer.js";
import { revive, type StoredJob } from "./stored.js";

/** BullMQ's `failedReason` (and deferred failure) for a job that stalled too often. */
export const STALLED_OUT = "job stalled more than allowable limit";

/**
 * Fails `h`'s job, fetched with a deferred failure, without running it: BullMQ's own error, so that
 * Redis keeps BullMQ's `failed` state and reason; then the `worker:job` dead-letter event, as a
 * dead letter by the worker has. A failure to move it (or no answer within `boundMs`) is dropped:
 * the job stays marked, and stalls back to wait for the next fetch to fail it.
 */
export function* failDeferred<T>(
  queue: string,
  h: Held<T>,
  boundMs = Infinity,
): Generator<unknown, void, unknown> {
  const { job, token } = h;
  const id = job.id ?? "";
  const reason = job.deferredFailure;
  try {
    // Bounded as the take is (`engineTimeoutMs`): unanswered, the job stays marked (see above).
    yield* timeout(boundMs, until(job.moveToFailed(new UnrecoverableError(reason), token, false)));
  } catch (e) {
    if (isCancelled(e)) throw e;
    return;
  } finally {
    h.consumer.untrack(h);
  }
  const letter = letterOf(queue, job);
  const attempt = job.data.attempt ?? 1;
  yield* emitEvent({ type: "worker:job", queue, jobId: id, attempt, transition: "dead-letter", ...letter });
}

/** Why a failed BullMQ job died, and its error, as a Keel dead letter reads them. */
export function letterOf<T>(
  queue: string,
  job: BullJob<StoredJob<T>>,
): { reason: DeadLetterReason; error: unknown } {
  const d = job.data;
  if (d.deadReason === undefined && job.failedReason === STALLED_OUT) {
    const error = new JobStalledOutError(queue, job.id ?? "", job.stalledCounter || undefined);
    return { reason: "stalled", error };
  }
  // Failed by the worker (its reason stored), or by BullMQ for another reason.
  return { reason: d.deadReason ?? "rejected", error: d.deadError ? revive(d.deadError) : job.failedReason };
}
