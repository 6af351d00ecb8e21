/**
 * Parsing `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP-date.
 * @module
 */

/**
 * The delay a `Retry-After` value asks for, in ms from `nowMs`; `undefined` for a missing,
 * negative or unparseable value (it is then ignored and backoff decides). A date in the past is 0.
 *
 * @example
 * ```ts
 * import { parseRetryAfter } from "@keel/core/http";
 * const now = Date.parse("2025-01-01T00:00:00Z");
 * console.log(parseRetryAfter("120", now)); // 120000
 * console.log(parseRetryAfter("Wed, 01 Jan 2025 00:00:30 GMT", now)); // 30000
 * console.log(parseRetryAfter("soon", now), parseRetryAfter(undefined, now)); // undefined undefined
 * ```
 */
export function parseRetryAfter(value: string | string[] | undefined, nowMs: number): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (v === undefined) return undefined;
  const text = v.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  if (!/[a-z]/i.test(text)) return undefined;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - nowMs);
}
