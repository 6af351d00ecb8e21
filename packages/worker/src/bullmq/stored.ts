/**
 * What the BullMQ engine stores in Redis for a job (its payload with the attempt history and the
 * deadline, as JSON) and how errors cross it: name, message, code and cause kept, revived as `Error`s.
 * @module
 */
import type { DeadLetterReason, JobAttempt } from "../engine.js";

/**
 * What is stored in Redis for one job: the payload and what the worker needs across processes.
 * Only what differs from a fresh job is written (a no-op job's record stays as small as a plain
 * BullMQ job's): a missing field reads as its default.
 */
export interface StoredJob<T> {
  payload: T;
  /** The next delivery's number (default 1). */
  attempt?: number;
  /** The job's own attempt limit (default: the worker's). */
  attempts?: number;
  /** The job's deadline (default: none; JSON has no Infinity). */
  deadlineAt?: number;
  /** The failed attempts so far (default none). */
  history?: StoredAttempt[];
  /** Tells this `add` from an earlier one with the same id (jobs added with an id only). */
  nonce?: string;
  deadReason?: DeadLetterReason;
  deadError?: StoredError;
}

/** An error as JSON can hold it: what identifies it (name, message, code), with its cause. */
export interface StoredError {
  name?: string;
  message?: string;
  code?: unknown;
  cause?: StoredError;
}

export type StoredAttempt = Omit<JobAttempt, "error"> & { error: StoredError };

export function storedError(e: unknown, depth = 0): StoredError {
  const o = (typeof e === "object" && e !== null ? e : { message: String(e) }) as Record<string, unknown>;
  const stored: StoredError = {
    name: o.name as string | undefined,
    message: o.message as string | undefined,
    code: o.code,
  };
  if (o.cause !== undefined && depth < 3) stored.cause = storedError(o.cause, depth + 1);
  return stored;
}

/** An `Error` with the stored name, message, code and cause (so `isJobExpiredError` and the like hold). */
export function revive(s: StoredError): Error {
  const e = new Error(s.message ?? "", s.cause ? { cause: revive(s.cause) } : undefined);
  if (s.name !== undefined) e.name = s.name;
  if (s.code !== undefined) Object.assign(e, { code: s.code });
  return e;
}
