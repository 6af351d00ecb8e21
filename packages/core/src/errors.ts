/**
 * The error base of Keel and the table of its stable codes.
 *
 * Every error that Keel raises carries a `code` that never changes between versions, so that code
 * and dashboards can match on it; the `isXxx` guards compare codes rather than classes, so they keep
 * working across duplicate copies of the package.
 * @module
 */

import { roundMs } from "./format-value.js";
import { type CancelReason, describeReason } from "./kernel/cancelled.js";
/**
 * What raises each code and whether a retry can help; the docs' error table is generated from it.
 *
 * @example
 * ```ts
 * import { errorCodes } from "@keel/core";
 * const { raisedBy, retryable } = errorCodes.KEEL_SCOPE_CLOSED;
 * console.log(raisedBy, retryable); // spawning into a scope that has finished false
 * console.log(errorCodes.KEEL_HTTP_STATUS.retryable); // "by status": each HttpError says in its own `retryable`
 * ```
 */
export const errorCodes = {
  KEEL_TIMEOUT: { raisedBy: "timeout, timeoutAt, shield (limit)", retryable: true },
  KEEL_TASK_CANCELLED: { raisedBy: "joining a task that ended cancelled", retryable: false },
  KEEL_INVALID_ARGUMENT: { raisedBy: "any API given a value outside its rule", retryable: false },
  KEEL_NO_TASK: { raisedBy: "an operation driven outside a Keel task", retryable: false },
  KEEL_SCOPE_CLOSED: { raisedBy: "spawning into a scope that has finished", retryable: false },
  KEEL_RETRY_EXHAUSTED: {
    raisedBy: "retry, when attempts, the budget or the deadline run out",
    retryable: false,
  },
  KEEL_BROKEN_CIRCUIT: {
    raisedBy: "a circuit breaker that is open (or half-open with its probe in flight)",
    retryable: false,
  },
  KEEL_CHANNEL_CLOSED: {
    raisedBy: "sending to, or receiving from, a closed and drained channel",
    retryable: false,
  },
  KEEL_HTTP_STATUS: {
    raisedBy: "an HTTP response with a status the request did not expect",
    retryable: "by status",
  },
  KEEL_HTTP_CONNECT_TIMEOUT: {
    raisedBy: "an HTTP request with no connection within timeouts.connectMs",
    retryable: true,
  },
  KEEL_HTTP_HEADERS_TIMEOUT: {
    raisedBy: "an HTTP request with no response headers within timeouts.headersMs",
    retryable: true,
  },
  KEEL_HTTP_BODY_TIMEOUT: {
    raisedBy: "an HTTP body with a gap between chunks longer than timeouts.bodyIdleMs",
    retryable: true,
  },
  KEEL_HTTP_TOTAL_TIMEOUT: { raisedBy: "an HTTP call not complete within timeouts.totalMs", retryable: true },
  KEEL_CLIENT_CLOSED: {
    raisedBy: "an HTTP client used after the scope that created it ended",
    retryable: false,
  },
  KEEL_BODY_RELEASED: {
    raisedBy: "reading a response body after the scope that made the request ended",
    retryable: false,
  },
  KEEL_HTTP_RESPONSE_TOO_LARGE: {
    raisedBy: "an HTTP body read whole (text, bytes, json, getJson) larger than maxResponseBytes",
    retryable: false,
  },
  KEEL_OPERATION_AWAITED: {
    raisedBy: "`await op` (or a promise resolved with an operation): an operation awaited instead of run",
    retryable: false,
  },
  KEEL_NOT_AN_INSTRUCTION: {
    raisedBy: "a generator that yields a value instead of yield* an operation",
    retryable: false,
  },
  KEEL_MAIN_RUNNING: { raisedBy: "main() while another main runs in the process", retryable: false },
} as const;

/**
 * A stable Keel error code.
 *
 * @example
 * ```ts
 * import { errorCodes, type KeelErrorCode } from "@keel/core";
 * const retryable = (code: KeelErrorCode) => errorCodes[code].retryable === true;
 * console.log(retryable("KEEL_TIMEOUT"), retryable("KEEL_TASK_CANCELLED")); // true false
 * ```
 */
export type KeelErrorCode = keyof typeof errorCodes;

/**
 * The base of Keel's own error classes.
 *
 * @example
 * ```ts
 * import { KeelError, isKeelError } from "@keel/core";
 * const e = new KeelError("KEEL_SCOPE_CLOSED", "spawn(op): the scope has finished");
 * console.log(isKeelError(e), e.code); // true KEEL_SCOPE_CLOSED
 * ```
 */
export class KeelError extends Error {
  /** The stable code; see {@link errorCodes}. */
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "KeelError";
    this.code = code;
  }
}

/**
 * True for any error raised by Keel (by its `code` prefix, so duplicate package copies agree).
 *
 * @example
 * ```ts
 * import { isKeelError, run, sleep, timeout } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * try {
 *   await run(() => timeout(100, sleep(1000)), { clock: createVirtualClock() });
 * } catch (e) {
 *   console.log(isKeelError(e) && e.code); // KEEL_TIMEOUT
 * }
 * console.log(isKeelError(new Error("plain"))); // false
 * ```
 */
export function isKeelError(e: unknown): e is KeelError {
  return (
    e instanceof Error &&
    typeof (e as { code?: unknown }).code === "string" &&
    (e as KeelError).code.startsWith("KEEL_")
  );
}

/**
 * A duration or instant that breaks its rule: a `RangeError` (so it reads as a programmer error)
 * with the code `KEEL_INVALID_ARGUMENT` and a message naming the parameter, the rule and the value.
 */
export function invalidRange(parameter: string, rule: string, got: unknown): RangeError {
  return withInvalidArgumentCode(new RangeError(`${parameter}: expected ${rule}, got ${describeValue(got)}`));
}

/** A value of the wrong kind: a `TypeError` naming the parameter, with code `KEEL_INVALID_ARGUMENT`. */
export function invalidType(parameter: string, rule: string, got: unknown): TypeError {
  return withInvalidArgumentCode(new TypeError(`${parameter}: expected ${rule}, got ${describeValue(got)}`));
}

/** An argument used in a way its rule forbids: a `TypeError` naming the parameter, with code `KEEL_INVALID_ARGUMENT`. */
export function invalidUse(parameter: string, rule: string): TypeError {
  return withInvalidArgumentCode(new TypeError(`${parameter}: ${rule}`));
}

/**
 * Checks an options argument: `undefined` or a plain object (not an array, not a primitive). Gives it
 * back typed, so the caller can read its fields.
 */
export function checkOptions<O extends object>(parameter: string, options: O | undefined): O | undefined {
  if (options === undefined) return undefined;
  if (typeof options !== "object" || options === null || Array.isArray(options))
    throw invalidType(parameter, "an options object", options);
  return options;
}

function withInvalidArgumentCode<E extends Error>(e: E): E {
  Object.defineProperty(e, "code", { value: "KEEL_INVALID_ARGUMENT", enumerable: true });
  return e;
}

/** Checks a duration in milliseconds: finite (or Infinity when allowed) and ≥ 0. */
export function checkDurationMs(parameter: string, value: unknown, allowInfinity = true): number {
  if (
    typeof value !== "number" ||
    Number.isNaN(value) ||
    value < 0 ||
    (!allowInfinity && value === Infinity)
  ) {
    throw invalidRange(
      parameter,
      allowInfinity ? "a number ≥ 0 (or Infinity)" : "a finite number ≥ 0",
      value,
    );
  }
  return value;
}

function describeValue(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v);
  if (typeof v === "function") return `function ${v.name || "(anonymous)"}`;
  if (v === null || typeof v !== "object") return String(v);
  // An operation has a `then` too (it throws): name it for what it is, before the promise test.
  const isIterable = typeof (v as Iterable<unknown>)[Symbol.iterator] === "function";
  if (isIterable && !Array.isArray(v) && typeof (v as PromiseLike<unknown>).then === "function")
    return "an operation (run it with `yield*`)";
  if (typeof (v as PromiseLike<unknown>).then === "function") return "a promise (wrap it: until(promise))";
  return Array.isArray(v) ? "an array" : "an object";
}

/**
 * Appends a later error to the primary's non-enumerable `suppressed` list (semantics §2: errors are
 * never dropped). Does nothing when the primary is not an extensible object; the caller still emits
 * an `error:suppressed` event in every case.
 */
export function appendSuppressed(primary: unknown, later: unknown): boolean {
  if (primary === null || (typeof primary !== "object" && typeof primary !== "function")) return false;
  if (!Object.isExtensible(primary)) return false;
  const holder = primary as { suppressed?: unknown[] };
  if (!Object.hasOwn(holder, "suppressed") || !Array.isArray(holder.suppressed)) {
    Object.defineProperty(holder, "suppressed", {
      value: [],
      enumerable: false,
      writable: true,
      configurable: true,
    });
  }
  holder.suppressed!.push(later);
  return true;
}

/**
 * Thrown by joining a task that ended cancelled (`yield* task`, `await task`). Only code running
 * inside a cancelled task ever sees `Cancelled`; everyone else sees this ordinary `Error`.
 *
 * @example
 * ```ts
 * import { run, suspend, TaskCancelledError } from "@keel/core";
 * const task = run(suspend);
 * task.cancel("no longer needed");
 * try { await task; } catch (e) { console.log(e instanceof TaskCancelledError, (e as Error).message); }
 * ```
 */
export class TaskCancelledError extends KeelError {
  /** The reason the task was cancelled with. */
  readonly reason: CancelReason;
  /** The cancelled task's path. */
  readonly taskPath: string;
  constructor(taskPath: string, reason: CancelReason) {
    super("KEEL_TASK_CANCELLED", `task ${taskPath} was cancelled (${describeReason(reason)})`);
    this.name = "TaskCancelledError";
    this.reason = reason;
    this.taskPath = taskPath;
  }
}

/**
 * True for a {@link TaskCancelledError}, across duplicate package copies.
 *
 * @example
 * ```ts
 * import { isTaskCancelledError, run, suspend } from "@keel/core";
 * const task = run(suspend);
 * await task.cancel("shutting down");
 * try {
 *   await task;
 * } catch (e) {
 *   if (isTaskCancelledError(e)) console.log(e.reason.kind, e.reason.message); // cancel shutting down
 * }
 * ```
 */
export function isTaskCancelledError(e: unknown): e is TaskCancelledError {
  return isKeelError(e) && e.code === "KEEL_TASK_CANCELLED";
}

/**
 * A timeout scope's own outcome: its deadline passed while its operation ran (semantics §4). Thrown
 * only by the scope that set the deadline; inside that scope's region the body sees `Cancelled`.
 *
 * @example
 * ```ts
 * import { run, sleep, timeout, TimeoutError } from "@keel/core";
 * try { await run(timeout(10, sleep(1000))); }
 * catch (e) { if (e instanceof TimeoutError) console.log(e.code, e.timeoutMs, e.elapsedMs); }
 * ```
 */
export class TimeoutError extends KeelError {
  /** The budget the scope was given (for `timeoutAt`, the time from entry to the deadline). */
  readonly timeoutMs: number;
  /** The deadline, on the runtime's clock. */
  readonly deadline: number;
  /** Time from the scope's entry until it threw. */
  readonly elapsedMs: number;
  /** The scope's label: `timeout(100)`. */
  readonly label: string;
  constructor(init: {
    timeoutMs: number;
    deadline: number;
    elapsedMs: number;
    label: string;
    message?: string;
    code?: string;
  }) {
    super(
      init.code ?? "KEEL_TIMEOUT",
      init.message ?? `${init.label}: timed out after ${roundMs(init.timeoutMs)} ms`,
    );
    this.name = "TimeoutError";
    this.timeoutMs = init.timeoutMs;
    this.deadline = init.deadline;
    this.elapsedMs = init.elapsedMs;
    this.label = init.label;
  }
}

/**
 * True for a {@link TimeoutError} (by its `name` and numeric fields, across package copies).
 *
 * @example
 * ```ts
 * import { isTimeoutError, run, sleep, timeout } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const outcome = await run(function* () {
 *   try {
 *     yield* timeout(50, sleep(200));
 *     return "done";
 *   } catch (e) {
 *     if (isTimeoutError(e)) return `gave up after ${e.elapsedMs} ms`;
 *     throw e;
 *   }
 * }, { clock: createVirtualClock() });
 * console.log(outcome); // "gave up after 50 ms"
 * ```
 */
export function isTimeoutError(e: unknown): e is TimeoutError {
  return (
    e instanceof Error && /TimeoutError$/.test(e.name) && typeof (e as TimeoutError).timeoutMs === "number"
  );
}
