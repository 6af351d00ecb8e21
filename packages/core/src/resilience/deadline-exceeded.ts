/**
 * `isDeadlineExceeded`: one test for "ran out of time", whichever layer noticed first.
 * @module
 */
import { errorCodes, isKeelError } from "../errors.js";
import { isRetryExhaustedError } from "./retry-exhausted-error.js";

/**
 * The codes that mean a time limit passed: by the convention of the code table, every code that ends
 * in `_TIMEOUT` (`KEEL_TIMEOUT`, and each HTTP phase's). Read from the table, so a layer above this
 * one (HTTP) is covered without being imported, and a new timeout code joins by its name.
 */
const timeoutCodes: ReadonlySet<string> = new Set(
  Object.keys(errorCodes).filter((code) => code.endsWith("_TIMEOUT")),
);

/**
 * True when `e` says a time limit ran out: a `TimeoutError` (from `timeout`, `timeoutAt` or a
 * shield's limit), an `HttpTimeoutError` of any phase, or a `RetryExhaustedError` whose reason is
 * `"deadline"` or `"budget"`. Which of these a caller gets depends on timing (a retry that sees the
 * deadline coming gives up before the timeout fires), so test with this rather than with one class.
 * A `RetryExhaustedError` that ran out of attempts is not a deadline. Matched by code, so it works
 * across duplicate copies of the package.
 *
 * @example
 * ```ts
 * import { constant, isDeadlineExceeded, retry, run, sleep, timeout } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * function* flaky() { yield* sleep(40); throw Object.assign(new Error("busy"), { status: 503 }); }
 * for (const op of [() => timeout(30, flaky), () => timeout(85, retry(flaky, { backoff: constant(50) }))]) {
 *   try {
 *     await run(op, { clock: createVirtualClock() });
 *   } catch (e) {
 *     console.log((e as Error).name, isDeadlineExceeded(e)); // TimeoutError true, then RetryExhaustedError true
 *   }
 * }
 * console.log(isDeadlineExceeded(new Error("busy"))); // false
 * ```
 */
export function isDeadlineExceeded(e: unknown): boolean {
  if (!isKeelError(e)) return false;
  if (timeoutCodes.has(e.code)) return true;
  return isRetryExhaustedError(e) && (e.reason === "deadline" || e.reason === "budget");
}
