/**
 * What the BullMQ engine stores in Redis for a job (its payload with the attempt history and the
 * deadline, as JSON) and how errors cross it: name, message, code and cause kept, revived as `Error`s.
 * @module
 */
import { describeThrown } from "@keel/core";
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

/** A stored message is cut here (a failure's reason, not its payload); a name or code at 200. */
const MAX_MESSAGE = 2000;
const MAX_FIELD = 200;
/** Causes kept below the error itself. */
const MAX_CAUSES = 3;

/**
 * `e` as JSON can hold it, whatever it is: name and message as bounded strings, `code` as a
 * string, number, boolean or null (anything else described: a BigInt `10n`, a circular object),
 * and up to 3 causes (a cycle ends where it comes back). Reads each field once, in a try: a getter
 * that throws, a Proxy, a revoked Proxy give a field described as unreadable, never a throw. A value
 * that is not an object is stored as its description (`"boom"`, `Symbol(x)`, `undefined`).
 */
export function storedError(e: unknown, depth = 0, seen: object[] = []): StoredError {
  if (e === null || (typeof e !== "object" && typeof e !== "function"))
    return { message: typeof e === "string" ? cut(e, MAX_MESSAGE) : describeThrown(e) };
  seen.push(e);
  const o = e as Record<string, unknown>;
  const stored: StoredError = {};
  const name = read(o, "name");
  if (name !== undefined) stored.name = text(name, MAX_FIELD);
  const message = read(o, "message");
  stored.message = message === undefined ? describeThrown(e) : text(message, MAX_MESSAGE);
  const code = read(o, "code");
  if (code !== undefined) stored.code = jsonCode(code);
  const cause = read(o, "cause");
  if (cause !== undefined && depth < MAX_CAUSES && !seen.includes(cause as object))
    stored.cause = storedError(cause, depth + 1, seen);
  return stored;
}

/** `o[key]`, or a string saying it could not be read. */
function read(o: Record<string, unknown>, key: string): unknown {
  try {
    return o[key];
  } catch (error) {
    return `[${key} threw: ${describeThrown(error)}]`;
  }
}

function text(v: unknown, max: number): string {
  return typeof v === "string" ? cut(v, max) : describeThrown(v);
}

function jsonCode(code: unknown): string | number | boolean | null {
  if (typeof code === "string") return cut(code, MAX_FIELD);
  if (typeof code === "number") return Number.isFinite(code) ? code : String(code);
  if (typeof code === "boolean" || code === null) return code;
  return describeThrown(code);
}

function cut(s: string, max: number): string {
  return s.length > max ? `${s.slice(0, max)}… (${s.length - max} more characters)` : s;
}

/** BullMQ keeps at most this much of a dead job's stack. */
const MAX_STACK = 8000;

/**
 * The error handed to BullMQ's `moveToFailed` for a dead letter: its `message` (the job's
 * `failedReason`) and name are the stored, bounded ones, its `stack` the original's when that reads
 * as a string (cut), so what BullMQ's tools show is readable whatever was thrown.
 */
export function failedError(stored: StoredError, original: unknown): Error {
  const e = new Error(stored.message ?? "");
  if (stored.name !== undefined) e.name = stored.name;
  let stack: unknown;
  try {
    stack = (original as { stack?: unknown } | null)?.stack;
  } catch {}
  e.stack = typeof stack === "string" ? cut(stack, MAX_STACK) : `${e.name}: ${e.message}`;
  return e;
}

/** An `Error` with the stored name, message, code and cause (so `isJobExpiredError` and the like hold). */
export function revive(s: StoredError): Error {
  const e = new Error(s.message ?? "", s.cause ? { cause: revive(s.cause) } : undefined);
  if (s.name !== undefined) e.name = s.name;
  if (s.code !== undefined) Object.assign(e, { code: s.code });
  return e;
}
