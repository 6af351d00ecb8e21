/**
 * Jobs that stalled out (`maxStalls`). BullMQ 6.7's stalled check does not fail a job that stalled
 * more than `maxStalledCount` times: it marks it with a deferred failure ("job stalled more than
 * allowable limit") and puts it back to wait, for the next worker that fetches it to fail it
 * unrun, as BullMQ's own loop does (`processJob`). The engine fetches by hand, so it hands such a
 * job over with `stalledOut` (a `JobStalledOutError`), and the worker dead-letters it unrun as
 * `stalled` (counted, its event and the `deadLetter` sink as for any dead letter), with BullMQ's
 * own reason kept in Redis; otherwise a job that kills its process is delivered forever. A failed
 * job reads back as a Keel dead letter: reason and error as the worker stored them, or, for
 * BullMQ's stalled failure (a job failed so by BullMQ's own workers), `stalled` with a
 * `JobStalledOutError`.
 * @module
 */
import type { Job as BullJob } from "bullmq";
import type { DeadLetterReason } from "../engine.js";
import { JobStalledOutError } from "../errors.js";
import { keelOf, revive } from "./stored.js";

/** BullMQ's `failedReason` (and deferred failure) for a job that stalled too often. */
export const STALLED_OUT = "job stalled more than allowable limit";

/** Why a failed BullMQ job died, and its error, as a Keel dead letter reads them. */
export function letterOf<T>(queue: string, job: BullJob<T>): { reason: DeadLetterReason; error: unknown } {
  const d = keelOf(job);
  if (d.deadReason === undefined && job.failedReason === STALLED_OUT) {
    const error = new JobStalledOutError(queue, job.id ?? "", job.stalledCounter || undefined);
    return { reason: "stalled", error };
  }
  // Failed by the worker (its reason stored), or by BullMQ for another reason.
  return { reason: d.deadReason ?? "rejected", error: d.deadError ? revive(d.deadError) : job.failedReason };
}
