/**
 * `isTransient`: which failures a retry can help with.
 * @module
 */
import { isKeelError, isTimeoutError } from "../errors.js";
import { isCancelled } from "../kernel/cancelled.js";

/**
 * HTTP statuses that mean "the service did not process this request; try again".
 *
 * @example
 * ```ts
 * import { retryableStatuses } from "@keel/core";
 * console.log([400, 404, 408, 429, 500, 501, 503].filter((s) => retryableStatuses.has(s))); // [408, 429, 500, 503]
 * ```
 */
export const retryableStatuses: ReadonlySet<number> = new Set([408, 425, 429, 500, 502, 503, 504]);

/** Error codes of network failures that a new attempt can cure. */
export const transientNetworkCodes: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "ECONNABORTED",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EAI_AGAIN",
  "UND_ERR_SOCKET",
  "UND_ERR_CLOSED",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
]);

/**
 * True for failures worth another attempt: network errors (connection refused or reset, socket hang
 * up, EPIPE, ETIMEDOUT), errors carrying a retryable HTTP `status` (408, 425, 429, 500, 502, 503, 504),
 * and `TimeoutError`s (a retry loop only ever sees its own attempt's; an enclosing one reaches it as a
 * cancellation). Never: `Cancelled`, programmer errors (`TypeError`, `RangeError`, `SyntaxError`), a
 * `RetryExhaustedError` from an inner retry (layers must not multiply), or any error that says
 * `retryable: false`. An error that says `retryable: true` is transient.
 *
 * @example
 * ```ts
 * import { isTransient } from "@keel/core";
 * console.log(isTransient(Object.assign(new Error("unavailable"), { status: 503 }))); // true
 * console.log(isTransient(new TypeError("x is undefined"))); // false
 * ```
 */
export function isTransient(error: unknown): boolean {
  if (isCancelled(error) || typeof error !== "object" || error === null) return false;
  const e = error as {
    retryable?: unknown;
    code?: unknown;
    status?: unknown;
    statusCode?: unknown;
    cause?: unknown;
  };
  if (e.retryable === false) return false;
  if (e.retryable === true) return true;
  if (isKeelError(error) && (error.code === "KEEL_RETRY_EXHAUSTED" || error.code === "KEEL_BROKEN_CIRCUIT"))
    return false;
  if (isTimeoutError(error)) return true;
  const status = typeof e.status === "number" ? e.status : e.statusCode;
  if (typeof status === "number") return retryableStatuses.has(status);
  if (hasNetworkCode(error, 0)) return true;
  if (error instanceof TypeError || error instanceof RangeError || error instanceof SyntaxError) return false;
  return false;
}

function hasNetworkCode(error: unknown, depth: number): boolean {
  if (typeof error !== "object" || error === null || depth > 4) return false;
  const e = error as { code?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
  if (typeof e.code === "string" && transientNetworkCodes.has(e.code)) return true;
  if (typeof e.message === "string" && /socket hang up/i.test(e.message)) return true;
  if (Array.isArray(e.errors) && e.errors.some((x) => hasNetworkCode(x, depth + 1))) return true;
  return hasNetworkCode(e.cause, depth + 1);
}
