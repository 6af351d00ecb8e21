/**
 * `retry`: bounded retries with backoff, under every deadline.
 * @module
 */

import { checkDurationMs, invalidRange, invalidType, isTimeoutError } from "../errors.js";
import { BoundOp1, nameBody } from "../kernel/bound-op.js";
import { isCancelled } from "../kernel/cancelled.js";
import { currentTask, delegate } from "../kernel/current.js";
import { exitFrameOutcome } from "../kernel/frame-exit.js";
import type { NotAPromise } from "../kernel/not-a-promise.js";
import { checkRerunnableOp, nameOf, type Op, type Operation, type Outcome } from "../kernel/operation.js";
import { randomSourceOf } from "../kernel/random.js";
import type { TaskImpl } from "../kernel/task.js";
import { sleep } from "../time/sleep.js";
import { timeoutScope } from "../time/timeout.js";
import { type Backoff, type BackoffState, exponential } from "./backoff.js";
import {
  type AttemptRecord,
  type GiveUpReason,
  isRetryExhaustedError,
  RetryExhaustedError,
} from "./retry-exhausted-error.js";
import { isTransient } from "./transient.js";

/**
 * What `retryOn` learns about the failed attempt.
 *
 * @example
 * ```ts
 * import { type AttemptInfo, constant, retry, run, sleep } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const seen: string[] = [];
 * let calls = 0;
 * const v = await run(() => retry(function* slowThenFast() {
 *   yield* sleep(++calls === 1 ? 500 : 10);
 *   return `attempt ${calls}`;
 * }, {
 *   perAttemptMs: 100,
 *   backoff: constant(0),
 *   retryOn: (_error, info: AttemptInfo) => {
 *     seen.push(`attempt ${info.attempt} timedOut=${info.timedOut} after ${info.elapsedMs} ms`);
 *     return info.timedOut; // retry only attempts cut by perAttemptMs
 *   },
 * }), { clock: createVirtualClock() });
 * console.log(v, seen); // attempt 2 ["attempt 1 timedOut=true after 100 ms"]
 * ```
 */
export interface AttemptInfo {
  readonly attempt: number;
  readonly elapsedMs: number;
  /** True when the attempt ended by its own per-attempt timeout. */
  readonly timedOut: boolean;
}

/**
 * What `onRetry` learns before each backoff sleep.
 *
 * @example
 * ```ts
 * import { constant, type RetryInfo, retry, run } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const pauses: string[] = [];
 * let calls = 0;
 * await run(() => retry(function* flaky() {
 *   calls++;
 *   if (calls === 1) throw Object.assign(new Error("rate limited"), { status: 429, retryAfterMs: 1000 });
 *   if (calls === 2) throw Object.assign(new Error("unavailable"), { status: 503 });
 * }, {
 *   backoff: constant(250),
 *   onRetry: (info: RetryInfo) =>
 *     pauses.push(`${(info.error as Error).message}: ${info.delayMs} ms (${info.delayReason})`),
 * }), { clock: createVirtualClock() });
 * console.log(pauses); // ["rate limited: 1000 ms (retry-after)", "unavailable: 250 ms (backoff)"]
 * ```
 */
export interface RetryInfo extends AttemptInfo {
  readonly error: unknown;
  readonly delayMs: number;
  readonly delayReason: "backoff" | "retry-after";
}

/**
 * How `retry` behaves. Every field is optional.
 *
 * @example
 * ```ts
 * import { exponential, type RetryPolicy, retry, run, sleep } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const policy: RetryPolicy = {
 *   attempts: 4,
 *   budgetMs: 2000,
 *   perAttemptMs: 300,
 *   backoff: exponential({ baseMs: 100, jitter: "none" }),
 * };
 * const clock = createVirtualClock();
 * let calls = 0;
 * const quote = await run(() => retry(function* fetchQuote() {
 *   if (++calls < 3) yield* sleep(1000); // the first two attempts hang and are cut at 300 ms
 *   return `quote after ${calls} attempts`;
 * }, policy), { clock });
 * console.log(quote, clock.now()); // quote after 3 attempts 900
 * ```
 */
export interface RetryPolicy {
  /** Total attempts, the first included (default 5). */
  attempts?: number;
  /** Total time for all attempts and sleeps: a timeout scope around the whole loop. */
  budgetMs?: number;
  /** Each attempt's own timeout, clamped to what is left of every deadline. */
  perAttemptMs?: number;
  /** Delays between attempts (default: `exponential({ baseMs: 200, factor: 2, maxMs: 3000, jitter: "full" })`). */
  backoff?: Backoff;
  /** Which failures to retry (default {@link isTransient}); never called with a cancellation. */
  retryOn?: (error: unknown, attempt: AttemptInfo) => boolean;
  /** Called before each backoff sleep. */
  onRetry?: (info: RetryInfo) => void;
}

const NO_TIMEOUTS: WeakSet<object> = new WeakSet();
const defaultBackoff = exponential({ baseMs: 200, factor: 2, maxMs: 3000, jitter: "full" });

/**
 * Runs `op`, and again after a backoff delay when it fails with a retryable error, until it succeeds
 * or the attempts, the budget or the deadline run out.
 *
 * - A non-retryable error propagates unchanged, at any attempt. Only running out produces
 *   `RetryExhaustedError` (`reason` `"attempts"`, `"budget"` or `"deadline"`, with the history).
 * - A cancellation is never retried: during an attempt or a backoff sleep it ends the loop at once.
 * - Each attempt runs in its own scope; with `perAttemptMs`, a timeout scope whose `TimeoutError` is
 *   retryable. An enclosing timeout reaches the loop as a cancellation and is never retried.
 * - A sleep that would cross the deadline or the budget is not started: the loop gives up at once.
 * - An error's `retryAfterMs` (set from `Retry-After` by the HTTP client) replaces the backoff delay.
 * - A `perAttemptMs` that leaves no room for a second attempt emits a `retry:unreachable` warning.
 *
 * **Time**: the jitter's randomness comes from the runtime's random source (`withRandom`).
 *
 * @example
 * ```ts
 * import { constant, retry, run } from "@keel/core";
 * let calls = 0;
 * const v = await run(() => retry(function* flaky() {
 *   if (++calls < 3) throw Object.assign(new Error("unavailable"), { status: 503 });
 *   return "ok";
 * }, { attempts: 5, backoff: constant(10) }));
 * console.log(v, calls); // "ok" 3
 * ```
 * @throws `RangeError` for `attempts` that is not a whole number ≥ 1, or a bad duration; `TypeError`
 * for a non-operation or a non-function `retryOn`/`onRetry`.
 */
export function retry<T>(op: Op<T>, policy: RetryPolicy = {}): Operation<T> & NotAPromise {
  checkRerunnableOp("retry(op)", op);
  checkRetryPolicy("retry(op, ", policy);
  const attempts = policy.attempts ?? 5;
  const { budgetMs, perAttemptMs } = policy;
  const backoff = policy.backoff ?? defaultBackoff;
  const retryOn = policy.retryOn ?? isTransient;
  const label = `retry(${nameOf(op, "op")})`;

  return new BoundOp1(runRetry, {
    op,
    label,
    attempts,
    budgetMs,
    perAttemptMs,
    backoff,
    retryOn,
    policy,
  }) as Operation<T> & NotAPromise;
}

/**
 * @internal Checks a {@link RetryPolicy} given where `open` says (`"retry(op, "`, or
 * `"createHttpClient({ retry: "`), so each error names the option as the caller wrote it:
 * `retry(op, { attempts })`, `createHttpClient({ retry: { attempts } })`.
 */
export function checkRetryPolicy(open: string, policy: unknown): asserts policy is RetryPolicy {
  const close = open.endsWith(": ") ? " })" : ")";
  const at = (option: string) => `${open}{ ${option} }${close}`;
  if (typeof policy !== "object" || policy === null || Array.isArray(policy))
    throw invalidType(`${open}policy${close}`, "a RetryPolicy object", policy);
  const { attempts, budgetMs, perAttemptMs, backoff, retryOn, onRetry } = policy as RetryPolicy;
  if (
    attempts !== undefined &&
    (typeof attempts !== "number" || !(Number.isInteger(attempts) || attempts === Infinity) || attempts < 1)
  ) {
    throw invalidRange(at("attempts"), "a whole number ≥ 1", attempts);
  }
  if (budgetMs !== undefined) checkDurationMs(at("budgetMs"), budgetMs);
  if (perAttemptMs !== undefined) checkDurationMs(at("perAttemptMs"), perAttemptMs);
  if (backoff !== undefined && typeof backoff?.next !== "function")
    throw invalidType(at("backoff"), "a Backoff", backoff);
  if (retryOn !== undefined && typeof retryOn !== "function")
    throw invalidType(at("retryOn"), "a function", retryOn);
  if (onRetry !== undefined && typeof onRetry !== "function")
    throw invalidType(at("onRetry"), "a function", onRetry);
}

function* runRetry<T>(config: RetryConfig<T>): Generator<unknown, T, unknown> {
  const task = yield* currentTask(config.label);
  task.checkpoint();
  const counter: Counter = { started: 0, gaveUp: false };
  // Decided once, at entry: a retry reports both its start and its end, or neither.
  if (!task.runtime.listening) return yield* retryIn(task, config, counter);
  const { label, attempts, budgetMs, perAttemptMs } = config;
  task.emit({
    type: "retry:start",
    label,
    attempts,
    budgetMs: budgetMs ?? null,
    perAttemptMs: perAttemptMs ?? null,
    deadlineLeftMs: leftMs(task),
  });
  try {
    const value = yield* retryIn(task, config, counter);
    task.emit({ type: "retry:end", label, attempt: counter.started, outcome: "success" });
    return value;
  } catch (error) {
    const outcome = isCancelled(error) ? "cancelled" : counter.gaveUp ? "giveup" : "failed";
    task.emit({ type: "retry:end", label, attempt: counter.started, outcome, error });
    throw error;
  }
}

/** Attempts started, and whether the loop gave up (a `retry:giveup`), for `retry:end`. */
interface Counter {
  started: number;
  gaveUp: boolean;
}

/** What is left of the deadline in force where `task` runs now (`Infinity` when none). */
function leftMs(task: TaskImpl<unknown>): number {
  return Math.max(0, task.effectiveDeadline() - task.clock.now());
}

function* retryIn<T>(
  task: TaskImpl<unknown>,
  config: RetryConfig<T>,
  counter: Counter,
): Generator<unknown, T, unknown> {
  const { op, label, attempts, budgetMs, perAttemptMs, backoff, retryOn, policy } = config;
  const startedAt = task.clock.now();
  const outerDeadline = task.effectiveDeadline();
  const budgetDeadline = budgetMs === undefined ? Infinity : startedAt + budgetMs;
  const history: AttemptRecord[] = [];
  // Only a loop with its own timeouts needs to recognise their errors.
  const ownTimeouts =
    budgetMs !== undefined || perAttemptMs !== undefined ? new WeakSet<object>() : NO_TIMEOUTS;
  const loop = attemptLoop<T>({
    counter,
    task,
    op,
    label,
    attempts,
    perAttemptMs,
    backoff,
    retryOn,
    policy,
    history,
    ownTimeouts,
    startedAt,
    outerDeadline,
    budgetDeadline,
  });
  if (budgetMs === undefined) return yield* loop;
  try {
    return yield* timeoutScope(loop, `${label} budget ${budgetMs} ms`, (t) => t + budgetMs, {
      own: ownTimeouts,
      report: true,
    });
  } catch (e) {
    if (!ownTimeouts.has(e as object) || !isTimeoutError(e) || e.label !== `${label} budget ${budgetMs} ms`)
      throw e;
    // The budget can only run out during an attempt (no sleep may cross it), so that attempt,
    // cut by the budget, counts, and the budget's own TimeoutError is the cause.
    counter.gaveUp = true;
    throw giveUp(task, label, "budget", history, e, startedAt, null, counter.started);
  }
}

/** A retry call's checked policy, what its operation runs with. */
interface RetryConfig<T> {
  op: Op<T>;
  label: string;
  attempts: number;
  budgetMs: number | undefined;
  perAttemptMs: number | undefined;
  backoff: Backoff;
  retryOn: (error: unknown, attempt: AttemptInfo) => boolean;
  policy: RetryPolicy;
}

interface LoopInit<T> {
  counter: Counter;
  task: TaskImpl<unknown>;
  op: Op<T>;
  label: string;
  attempts: number;
  perAttemptMs: number | undefined;
  backoff: Backoff;
  retryOn: (error: unknown, attempt: AttemptInfo) => boolean;
  policy: RetryPolicy;
  history: AttemptRecord[];
  ownTimeouts: WeakSet<object>;
  startedAt: number;
  outerDeadline: number;
  budgetDeadline: number;
}

/**
 * `scoped(op)` for one attempt, without finding the task again or naming the scope again, and
 * giving back its outcome rather than throwing it: the loop would only catch it again.
 */
function* attemptScope<T>(
  task: TaskImpl<unknown>,
  op: Op<T>,
  label: string,
): Generator<unknown, Outcome<T>, unknown> {
  task.checkpoint();
  const frame = task.pushFrame("scoped", label);
  let outcome: Outcome<T>;
  try {
    outcome = { ok: true, value: yield* delegate(op) };
  } catch (error) {
    outcome = { ok: false, error };
  }
  return yield* exitFrameOutcome(task, frame, outcome);
}

/** Reports attempt `attempt`'s success (only for a listener) and hands its value on. */
function succeeded<T>(task: TaskImpl<unknown>, attempt: number, label: string, value: T): T {
  if (task.runtime.listening) task.emit({ type: "retry:success", attempt, label });
  return value;
}

function attemptLoop<T>(init: LoopInit<T>): Operation<T> & NotAPromise {
  return new BoundOp1(runAttempts, init) as Operation<T> & NotAPromise;
}

function* runAttempts<T>(init: LoopInit<T>): Generator<unknown, T, unknown> {
  const { task, op, label, attempts, perAttemptMs, backoff, retryOn, policy, history, ownTimeouts } = init;
  const clock = task.clock;
  const countAtEntry = task.requestCount;
  const scopeLabel = `scoped(${nameOf(op, "op")})`;
  warnIfUnreachable(init);
  let state: BackoffState;
  for (let attempt = 1; ; attempt++) {
    const attemptStart = clock.now();
    init.counter.started = attempt;
    if (task.runtime.listening)
      task.emit({ type: "retry:attempt", attempt, attempts, label, deadlineLeftMs: leftMs(task) });
    let error: unknown;
    if (perAttemptMs === undefined) {
      const o = yield* attemptScope(task, op, scopeLabel);
      if (o.ok) return succeeded(task, attempt, label, o.value);
      error = o.error;
    } else {
      try {
        const value = yield* timeoutScope(
          op,
          `${label} attempt ${attempt}`,
          (t) => Math.min(t + perAttemptMs, task.effectiveDeadline()),
          { own: ownTimeouts, report: true },
        );
        return succeeded(task, attempt, label, value);
      } catch (e) {
        error = e;
      }
    }
    // A cancellation is never retried. An error that ends the attempt while the task is being
    // cancelled (a `finally` that threw as `Cancelled` unwound it) beats the cancellation
    // (semantics §2): it propagates unchanged, as it would without `retry`, and the scopes above
    // report the replaced cancellation.
    if (isCancelled(error) || task.requestCount > countAtEntry) throw error;
    const now = clock.now();
    const timedOut = ownTimeouts.has(error as object);
    const info: AttemptInfo = { attempt, elapsedMs: now - init.startedAt, timedOut };
    const record: { -readonly [K in keyof AttemptRecord]: AttemptRecord[K] } = {
      attempt,
      startedAt: attemptStart,
      endedAt: now,
      error,
    };
    history.push(record);
    // Layers must not multiply: an inner retry's exhaustion is final, whatever retryOn says.
    if (isRetryExhaustedError(error) || !retryOn(error, info)) {
      init.counter.gaveUp = true;
      if (task.runtime.listening)
        task.emit({ type: "retry:giveup", attempt, reason: "not-retryable", delayMs: null, error });
      throw error;
    }
    if (attempt >= attempts) {
      init.counter.gaveUp = true;
      throw giveUp(task, label, "attempts", history, error, init.startedAt, null);
    }
    const retryAfterMs = (error as { retryAfterMs?: unknown } | null)?.retryAfterMs;
    let delayMs: number;
    let delayReason: "backoff" | "retry-after";
    if (typeof retryAfterMs === "number" && Number.isFinite(retryAfterMs) && retryAfterMs >= 0) {
      delayMs = retryAfterMs;
      delayReason = "retry-after";
    } else {
      const step = backoff.next(state, randomSourceOf(task));
      state = step.state;
      delayMs = step.delayMs;
      delayReason = "backoff";
    }
    const deadlineNow = task.effectiveDeadline();
    if (now + delayMs >= deadlineNow) {
      // Starting this sleep could only end in a timeout: give up now, with the history.
      const reason: GiveUpReason = init.budgetDeadline <= init.outerDeadline ? "budget" : "deadline";
      init.counter.gaveUp = true;
      throw giveUp(task, label, reason, history, error, init.startedAt, delayMs);
    }
    record.delayMs = delayMs;
    record.delayReason = delayReason;
    policy.onRetry?.({ ...info, error, delayMs, delayReason });
    if (task.runtime.listening) task.emit({ type: "retry:sleep", attempt, delayMs, delayReason, error });
    // A zero delay needs no timer (it would cost a trip through the event loop per retry);
    // the next attempt's entry is still a point where a pending cancellation is delivered.
    // Unbounded attempts keep the timer, so a loop that fails synchronously forever still
    // yields to the event loop and its budget can fire.
    if (delayMs > 0 || attempts === Infinity) yield* delegate(sleep(delayMs));
  }
}

function giveUp(
  task: TaskImpl<unknown>,
  label: string,
  reason: GiveUpReason,
  history: AttemptRecord[],
  cause: unknown,
  startedAt: number,
  delayMs: number | null,
  attempts = history.length,
): RetryExhaustedError {
  if (task.runtime.listening)
    task.emit({ type: "retry:giveup", attempt: attempts, reason, delayMs, error: cause });
  return new RetryExhaustedError({
    reason,
    attempts,
    elapsedMs: task.clock.now() - startedAt,
    history,
    cause,
    label,
  });
}

/**
 * The inverted-order incident: a per-attempt timeout no shorter than the time available means the
 * first attempt always consumes the whole budget, so the retry branch is dead code (and metrics say
 * "0 retries" forever). Checked once, when the loop starts.
 */
function warnIfUnreachable<T>(init: LoopInit<T>): void {
  const { task, perAttemptMs, attempts } = init;
  if (perAttemptMs === undefined || perAttemptMs === Infinity || attempts < 2) return;
  const availableMs = Math.min(init.budgetDeadline, init.outerDeadline) - init.startedAt;
  // Nothing is available at all: the deadline is already spent, which ends the loop anyway.
  if (perAttemptMs < availableMs || availableMs <= 0) return;
  task.emit({
    type: "retry:unreachable",
    perAttemptMs,
    availableMs,
    attempts,
    message: `${init.label}: the per-attempt timeout (${perAttemptMs} ms) is not shorter than the ${Math.round(availableMs)} ms available, so ${attempts === 2 ? "its one retry can never run" : `none of its ${attempts - 1} retries can ever run`}`,
  });
}

// What an awaited one of these operations is called in its KEEL_OPERATION_AWAITED error.
nameBody(runRetry, "retry");
nameBody(runAttempts, "retry");
