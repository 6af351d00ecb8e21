/**
 * `timeout` and `timeoutAt`: scopes with a deadline that own their cancellation.
 * @module
 */

import { checkDurationMs, invalidRange, invalidType, TimeoutError } from "../errors.js";
import { roundMs } from "../format-value.js";
import { BoundOp4, nameBody } from "../kernel/bound-op.js";
import { isCancelled } from "../kernel/cancelled.js";
import type { Clock } from "../kernel/clock.js";
import { currentTask, delegate } from "../kernel/current.js";
import { exitFrame } from "../kernel/frame-exit.js";
import type { NotAPromise } from "../kernel/not-a-promise.js";
import { checkOp, type Op, type Operation, type Outcome } from "../kernel/operation.js";
import { CLOCK_KEY } from "../kernel/task.js";

/**
 * Runs `op` with a budget of `ms`, counted from entry.
 *
 * When the budget runs out, the scope cancels its region: the body sees `Cancelled` at its current
 * suspension point, its `finally` blocks run (async cleanup allowed, within the cleanup budget), the
 * children spawned inside are cancelled, and then this scope, and only this scope, throws
 * `TimeoutError`. Nested timeouts compose by the counting rule: an inner timeout that fires and is
 * caught leaves the outer armed; when an outer one fires first (or at the same instant) the inner
 * stays silent. A `TimeoutError` thrown by `op` itself passes through untouched.
 *
 * **Time**: the deadline is inclusive (a result due exactly at it loses), travels to children, and is
 * readable with `deadline()` / `remaining()`. `timeout(0, op)` never starts `op`; `Infinity` disables.
 *
 * `options.label` says what timed out: `timeout(200, op, { label: "fetch orders" })` fails with
 * `timeout(200, fetch orders): timed out after 200 ms`.
 *
 * @example
 * ```ts
 * import { run, sleep, timeout, TimeoutError } from "@keel/core";
 * await run(function* handler() {
 *   try { yield* timeout(100, sleep(5000)); } catch (e) { console.log(e instanceof TimeoutError); } // true
 * });
 * ```
 * @throws `RangeError` for a negative or NaN `ms`; `TypeError` when `op` is not an operation, or for a `label` that is not a string.
 */
export function timeout<T>(ms: number, op: Op<T>, options?: TimeoutOptions): Operation<T> & NotAPromise {
  checkDurationMs("timeout(ms)", ms);
  checkOp("timeout(ms, op)", op);
  return timeoutScope(op, scopeLabel("timeout", ms, options), (t) => t + ms, REPORTED);
}

/** The public scopes report their start and end (`timeout:start`, `timeout:end`). */
const REPORTED: TimeoutExtra = { report: true };

/**
 * What a `timeout` or `timeoutAt` scope is called.
 *
 * @example
 * ```ts
 * import { run, sleep, type TimeoutOptions, timeout } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const options: TimeoutOptions = { label: "fetch orders" };
 * try {
 *   await run(() => timeout(200, sleep(1000), options), { clock: createVirtualClock() });
 * } catch (e) {
 *   console.log((e as Error).message); // timeout(200, fetch orders): timed out after 200 ms
 * }
 * ```
 */
export interface TimeoutOptions {
  /**
   * Says what is timed out: the scope is `timeout(200, fetch orders)` in the `TimeoutError`'s
   * message and `label`, in events and in the task tree.
   */
  label?: string;
}

/** `timeout(200)`, or `timeout(200, fetch orders)` with a label; checks the options on the way. */
function scopeLabel(
  api: "timeout" | "timeoutAt",
  bound: number,
  options: TimeoutOptions | undefined,
): string {
  const call = api === "timeout" ? "timeout(ms, op" : "timeoutAt(at, op";
  if (options === undefined) return `${api}(${roundMs(bound)})`;
  if (typeof options !== "object" || options === null)
    throw invalidType(`${call}, options)`, "an object", options);
  const { label } = options;
  if (label === undefined) return `${api}(${roundMs(bound)})`;
  if (typeof label !== "string") throw invalidType(`${call}, { label })`, "a string", label);
  return `${api}(${roundMs(bound)}, ${label})`;
}

/**
 * Like {@link timeout}, with an absolute deadline `at` on the runtime's clock: the way to share one
 * melting budget across several sequential calls. A deadline at or before now throws `TimeoutError`
 * without starting `op`.
 *
 * @example
 * ```ts
 * import { now, remaining, run, sleep, timeoutAt } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const left = await run(function* handler() {
 *   const at = (yield* now()) + 2000; // one budget for both calls
 *   yield* timeoutAt(at, sleep(500));
 *   return yield* timeoutAt(at, remaining); // the second call gets what is left
 * }, { clock: createVirtualClock() });
 * console.log(left); // 1500
 * ```
 * @throws `RangeError` for a NaN `at`; `TypeError` when `op` is not an operation, or for a `label` that is not a string.
 */
export function timeoutAt<T>(at: number, op: Op<T>, options?: TimeoutOptions): Operation<T> & NotAPromise {
  if (typeof at !== "number" || Number.isNaN(at))
    throw invalidRange("timeoutAt(at)", "a number (an instant on the runtime's clock)", at);
  checkOp("timeoutAt(at, op)", op);
  return timeoutScope(op, scopeLabel("timeoutAt", at, options), () => at, REPORTED);
}

/**
 * The scope behind both: `deadlineFrom(entryTime)` gives the deadline. `own` collects the errors this
 * scope itself raises, so a caller can tell its own timeout from one thrown by the operation.
 */
export function timeoutScope<T>(
  op: Op<T>,
  label: string,
  deadlineFrom: (t: number) => number,
  extra: TimeoutExtra = {},
): Operation<T> & NotAPromise {
  return new BoundOp4(inTimeout, op, label, deadlineFrom, extra) as Operation<T> & NotAPromise;
}

/** What a timeout scope of the runtime's own layers may add: a code, an owner set, its own error. */
export interface TimeoutExtra {
  code?: string;
  own?: WeakSet<object>;
  /** Makes the scope's error (a `TimeoutError` subclass for a phase, say). */
  make?: (init: { timeoutMs: number; deadline: number; elapsedMs: number; label: string }) => TimeoutError;
  /**
   * Emits `timeout:start` and `timeout:end` for a listener: the public scopes and a retry's. Internal
   * limits with events of their own (HTTP phases, shields, a body read's idle limit) leave it off,
   * so a trace shows the scopes a user wrote, not one per chunk read.
   */
  report?: boolean;
}

function* inTimeout<T>(
  op: Op<T>,
  label: string,
  deadlineFrom: (t: number) => number,
  extra: TimeoutExtra,
): Generator<unknown, T, unknown> {
  const { code, own, make, report } = extra;
  const task = yield* currentTask(label);
  task.checkpoint();
  const clock = task.top.contexts[CLOCK_KEY] as Clock;
  const enteredAt = clock.now();
  const deadline = deadlineFrom(enteredAt);
  const timeoutMs = Math.max(0, deadline - enteredAt);
  // The error this scope made, if it made one: `timeout:end` tells it from an error of the body's.
  let ownError: TimeoutError | null = null;
  let fired = false;
  const makeError = () => {
    const init = { timeoutMs, deadline, elapsedMs: clock.now() - enteredAt, label };
    const e = make ? make(init) : new TimeoutError({ ...init, ...(code ? { code } : {}) });
    own?.add(e);
    ownError = e;
    return e;
  };
  // A spent budget starts nothing: the deadline is inclusive, so `at === now` is already spent.
  if (deadline <= enteredAt) throw makeError();
  const frame = task.pushFrame("timeout", label, deadline);
  // Decided once, at entry: a scope reports both its start and its end, or neither.
  const reporting = report === true && task.runtime.listening;
  if (reporting) {
    const deadlineLeftMs = Math.max(0, frame.deadline - enteredAt);
    task.emit({ type: "timeout:start", scope: frame.info, timeoutMs, deadline, deadlineLeftMs });
  }
  if (deadline !== Infinity) {
    // Registered on entry, so it fires before resumptions due at the same instant. The frame
    // holds the cancel itself (its exit, or an abandonment, runs it): no cleanup closure.
    frame.own = clock.schedule(deadline, () => {
      frame.own = null;
      if (frame.closed || frame.bodySettled || frame.request) return;
      fired = true;
      task.emit({ type: "timeout:fire", scope: frame.info, timeoutMs, deadline });
      task.request(
        frame,
        {
          kind: "timeout",
          at: clock.now(),
          scope: frame.info,
          message: `${label}: timed out after ${roundMs(timeoutMs)} ms`,
        },
        false,
      );
    });
  }
  let outcome: Outcome<T>;
  try {
    outcome = { ok: true, value: yield* delegate(op) };
  } catch (error) {
    outcome = { ok: false, error };
  }
  frame.releaseOwn();
  if (!reporting) return yield* exitFrame(task, frame, outcome, makeError);
  const scope = frame.info;
  try {
    const value = yield* exitFrame(task, frame, outcome, makeError);
    task.emit({
      type: "timeout:end",
      scope,
      fired,
      outcome: "completed",
      elapsedMs: clock.now() - enteredAt,
    });
    return value;
  } catch (error) {
    const elapsedMs = clock.now() - enteredAt;
    if (isCancelled(error)) task.emit({ type: "timeout:end", scope, fired, outcome: "cancelled", elapsedMs });
    else {
      const result = error === ownError ? "timed-out" : "failed";
      task.emit({ type: "timeout:end", scope, fired, outcome: result, elapsedMs, error });
    }
    throw error;
  }
}

// What an awaited one of these operations is called in its KEEL_OPERATION_AWAITED error.
nameBody(inTimeout, "timeout");
