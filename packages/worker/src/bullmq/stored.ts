/**
 * What the BullMQ engine stores in Redis for a job, and how errors cross it: name, message, code and
 * cause kept, revived as `Error`s.
 *
 * A Keel job is a plain BullMQ job: its `data` is the payload, its attempt limit is BullMQ's own
 * `attempts` option, its attempts spent are BullMQ's `attemptsMade` (the next delivery is
 * `attemptsMade + 1`), its delay and priority are BullMQ's, a completed job's `returnvalue` is what
 * its handler returned, and a dead letter is `failed` with its `failedReason` and `stacktrace`.
 * What BullMQ has no field for (the deadline, the failed attempts' records, the add's nonce, why a
 * dead letter died) is one object in the job's options, `opts.keel` (`KeelOpts`). Why options and not
 * a companion key or a field of the job's hash of Keel's own: the options come back with every fetch
 * of the job, from BullMQ 5 and 6 alike (BullMQ 6 drops the hash fields it does not know when it
 * reads a job, so a field of Keel's own would cost a round trip per delivery), they are removed with
 * the job by everything that removes one (`removeOnComplete`, `removeOnFail`, `clean`, `obliterate`,
 * BullMQ's `removeJob`, which deletes the job's hash and its `:logs`, `:dependencies`, `:processed`,
 * `:failed` and `:unsuccessful` keys and nothing else), BullMQ keeps the keys it does not know as they
 * are (5 and 6 persist any option), and BullMQ's tools show them as options (bull-board's Options tab),
 * where a reader expects a job's settings, not in its data.
 * @module
 */
import { describeThrown } from "@keel/core";
import { UnrecoverableError } from "bullmq";
import type { DeadLetterReason, JobAttempt } from "../engine.js";

/**
 * Keel's own fields of a job, at `opts.keel`. Only what differs from a job's defaults is written
 * (a job added without a deadline or an id, never retried, has none): a missing field reads as its
 * default. The deadline and the nonce are written by the add, with the job (in BullMQ's own add
 * call); the history and the dead letter's reason and error by a retry or a dead letter, merged in
 * by `MERGE_KEEL` just before BullMQ's call that moves the job.
 */
export interface KeelOpts {
  /** The job's deadline, epoch ms (default: none; JSON has no Infinity). */
  deadlineAt?: number;
  /** The failed attempts so far (default none). */
  history?: StoredAttempt[];
  /** Tells this `add` from an earlier one with the same id (jobs added with an id only). */
  nonce?: string;
  deadReason?: DeadLetterReason;
  deadError?: StoredError;
}

/** Keel's fields of a job read from BullMQ (none for a job a plain BullMQ producer added). */
export function keelOf(job: { opts?: unknown }): KeelOpts {
  const keel = (job.opts as { keel?: unknown } | undefined)?.keel;
  return typeof keel === "object" && keel !== null ? (keel as KeelOpts) : {};
}

/**
 * Merges `ARGV[2]` (a JSON object) into `opts.keel` of the job at `KEYS[1]`, if this process still
 * holds its lock (`ARGV[1]`, the lock's token): the Lua JSON round trip is the one BullMQ's own
 * scripts make of a job's options (its add stores them through `cjson.encode`). Returns 0, or BullMQ's
 * codes: -1 for a job that is gone, -2 for a lock that is not this token's. Sent on the connection
 * BullMQ's own call that follows uses, so Redis runs the two in order.
 */
export const MERGE_KEEL = `local opts = redis.call("HGET", KEYS[1], "opts")
if not opts then return -1 end
if redis.call("GET", KEYS[1] .. ":lock") ~= ARGV[1] then return -2 end
local o = cjson.decode(opts)
local keel = o["keel"]
if type(keel) ~= "table" then keel = {} end
for k, v in pairs(cjson.decode(ARGV[2])) do keel[k] = v end
o["keel"] = keel
redis.call("HSET", KEYS[1], "opts", cjson.encode(o))
return 0`;

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
 * The error handed to BullMQ for a failure (a dead letter's `moveToFailed`, a retry's fields): its
 * `message` (the job's `failedReason`) and name are the stored, bounded ones, its `stack` the
 * original's when that reads as a string (cut), so what BullMQ's tools show is readable whatever was
 * thrown. It is BullMQ's `UnrecoverableError` whatever its name says, so that BullMQ's
 * `moveToFailed` never retries a job Keel dead-lettered (its `attempts` option is the job's limit).
 */
export function failedError(stored: StoredError, original: unknown): Error {
  const e: Error = new UnrecoverableError(stored.message ?? "");
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
