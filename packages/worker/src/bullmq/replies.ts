/**
 * BullMQ's replies read as the engine's: an error that says this process no longer holds a job, and
 * a job's state.
 * @module
 */
import type { JobState } from "../engine.js";
import { JobLockLostError } from "../engine-errors.js";

/**
 * BullMQ's errors that say this process no longer holds the job (its record or lock is gone, or it
 * is no longer active: the stalled check moved it), as a `JobLockLostError`; `null` for any other.
 */
export function lockLost(queue: string, id: string, error: unknown): JobLockLostError | null {
  const code = (error as { code?: unknown } | null)?.code;
  if (code !== -1 && code !== -2 && code !== -3 && code !== -6) return null;
  return new JobLockLostError(queue, id, (error as Error).message, { cause: error });
}

/** A BullMQ job state as the engine's (`failed` is a dead letter; a prioritized job waits). */
export function stateOf(state: string): JobState {
  switch (state) {
    case "delayed":
    case "active":
    case "completed":
      return state;
    case "failed":
      return "dead-lettered";
    default:
      return "waiting";
  }
}
