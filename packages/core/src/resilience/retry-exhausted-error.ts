/**
 * `RetryExhaustedError`: a retry loop ran out of attempts, budget or deadline.
 * @module
 */
import { isKeelError, KeelError } from "../errors.js";
import { describeThrown } from "../format-value.js";

/**
 * One attempt in a retry loop, for diagnosis.
 *
 * @example
 * ```ts
 * import { type AttemptRecord, constant, isRetryExhaustedError, retry, run, sleep } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const show = (r: AttemptRecord) =>
 *   `#${r.attempt} ${r.startedAt}-${r.endedAt}${r.delayMs === undefined ? "" : `, then ${r.delayMs} ms`}`;
 * try {
 *   await run(() => retry(function* down() {
 *     yield* sleep(50);
 *     throw Object.assign(new Error("503"), { status: 503 });
 *   }, { attempts: 3, backoff: constant(100) }), { clock: createVirtualClock() });
 * } catch (e) {
 *   if (isRetryExhaustedError(e)) console.log(e.history.map(show)); // ["#1 0-50, then 100 ms", "#2 150-200, then 100 ms", "#3 300-350"]
 * }
 * ```
 */
export interface AttemptRecord {
  /** 1 for the original call. */
  readonly attempt: number;
  readonly startedAt: number;
  readonly endedAt: number;
  readonly error: unknown;
  /** The delay chosen before the next attempt, and why; absent after the last attempt. */
  readonly delayMs?: number;
  readonly delayReason?: "backoff" | "retry-after";
}

/**
 * Why a retry loop gave up.
 *
 * @example
 * ```ts
 * import { constant, type GiveUpReason, isRetryExhaustedError, type RetryPolicy, retry, run, sleep } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * function* busy() { yield* sleep(100); throw Object.assign(new Error("busy"), { status: 503 }); }
 * async function whyItGaveUp(policy: RetryPolicy): Promise<GiveUpReason | undefined> {
 *   try {
 *     await run(() => retry(busy, { backoff: constant(50), ...policy }), { clock: createVirtualClock() });
 *   } catch (e) {
 *     if (isRetryExhaustedError(e)) return e.reason;
 *   }
 *   return undefined;
 * }
 * console.log(await whyItGaveUp({ attempts: 3 }), await whyItGaveUp({ budgetMs: 200 })); // attempts budget
 * ```
 */
export type GiveUpReason = "attempts" | "budget" | "deadline";

/**
 * Thrown by `retry` when it runs out of attempts, of its own `budgetMs`, or of the enclosing deadline;
 * `cause` is the last attempt's error and `history` says what happened at each attempt. A
 * non-retryable error is never wrapped: it propagates as it is.
 *
 * @example
 * ```ts
 * import { constant, retry, RetryExhaustedError, run } from "@keel/core";
 * try {
 *   await run(() => retry(function* flaky() { throw Object.assign(new Error("busy"), { status: 503 }); },
 *     { attempts: 2, backoff: constant(1) }));
 * } catch (e) { if (e instanceof RetryExhaustedError) console.log(e.reason, e.attempts, e.history.length); } // attempts 2 2
 * ```
 */
export class RetryExhaustedError extends KeelError {
  readonly reason: GiveUpReason;
  readonly attempts: number;
  readonly elapsedMs: number;
  readonly history: readonly AttemptRecord[];
  /** Never retried by an outer retry: layers of retries must not multiply. */
  readonly retryable = false;
  constructor(init: {
    reason: GiveUpReason;
    attempts: number;
    elapsedMs: number;
    history: readonly AttemptRecord[];
    cause: unknown;
    label: string;
  }) {
    const tries = `${init.attempts} ${init.attempts === 1 ? "attempt" : "attempts"}`;
    const why =
      init.reason === "attempts"
        ? init.attempts === 1
          ? "its only attempt failed"
          : `all ${tries} failed`
        : init.reason === "budget"
          ? `its budget ran out after ${tries}`
          : `the deadline leaves no time for another attempt after ${tries}`;
    super(
      "KEEL_RETRY_EXHAUSTED",
      `${init.label}: ${why} in ${Math.round(init.elapsedMs)} ms; last error: ${describeThrown(init.cause)}`,
      { cause: init.cause },
    );
    this.name = "RetryExhaustedError";
    this.reason = init.reason;
    this.attempts = init.attempts;
    this.elapsedMs = init.elapsedMs;
    this.history = init.history;
  }
}

/**
 * True for a {@link RetryExhaustedError}, across duplicate package copies.
 *
 * @example
 * ```ts
 * import { constant, isRetryExhaustedError, retry, run } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * try {
 *   await run(() => retry(function* connect() {
 *     throw Object.assign(new Error("connect ETIMEDOUT"), { code: "ETIMEDOUT" });
 *   }, { attempts: 2, backoff: constant(10) }), { clock: createVirtualClock() });
 * } catch (e) {
 *   // attempts 2 connect ETIMEDOUT
 *   if (isRetryExhaustedError(e)) console.log(e.reason, e.attempts, (e.cause as Error).message);
 * }
 * ```
 */
export function isRetryExhaustedError(e: unknown): e is RetryExhaustedError {
  return isKeelError(e) && e.code === "KEEL_RETRY_EXHAUSTED";
}
