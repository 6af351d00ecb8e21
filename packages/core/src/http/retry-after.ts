/**
 * Parsing `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP-date (§5.6.7).
 *
 * Strict on purpose: `Date.parse` reads almost anything as a date (`"retry 5"`, `"soon 2"` are
 * instants in 2001), and a date in the past means "retry at once", so a lenient parser turns a
 * garbled header into a retry storm. Anything that is not one of the four forms is ignored.
 * @module
 */

const DAYS = "(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)";
const LONG_DAYS = "(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)";
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const MONTH = `(${MONTHS.join("|")})`;
const TIME = "(\\d{2}):(\\d{2}):(\\d{2})";

/** `Sun, 06 Nov 1994 08:49:37 GMT`: the preferred form. */
const IMF_FIXDATE = new RegExp(`^${DAYS}, (\\d{2}) ${MONTH} (\\d{4}) ${TIME} GMT$`);
/** `Sunday, 06-Nov-94 08:49:37 GMT`: obsolete RFC 850, with a two-digit year. */
const RFC850_DATE = new RegExp(`^${LONG_DAYS}, (\\d{2})-${MONTH}-(\\d{2}) ${TIME} GMT$`);
/** `Sun Nov  6 08:49:37 1994`: ANSI C's asctime(), the day padded with a space. */
const ASCTIME_DATE = new RegExp(`^${DAYS} ${MONTH} ( \\d|\\d{2}) ${TIME} (\\d{4})$`);

/**
 * The delay a `Retry-After` value asks for, in ms from `nowMs`; `undefined` for a missing or
 * malformed value (it is then ignored and backoff decides). Accepted: delay-seconds (digits only)
 * and the three HTTP-date forms of RFC 9110 §5.6.7 (IMF-fixdate, RFC 850, asctime), case-sensitive
 * as the RFC says. A date in the past is 0.
 *
 * @example
 * ```ts
 * import { parseRetryAfter } from "@keel/core/http";
 * const now = Date.parse("2025-01-01T00:00:00Z");
 * console.log(parseRetryAfter("120", now)); // 120000
 * console.log(parseRetryAfter("Wed, 01 Jan 2025 00:00:30 GMT", now)); // 30000
 * console.log(parseRetryAfter("Wed Jan  1 00:01:00 2025", now)); // 60000
 * console.log(parseRetryAfter("retry 5", now), parseRetryAfter("soon", now)); // undefined undefined
 * ```
 */
export function parseRetryAfter(value: string | string[] | undefined, nowMs: number): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (typeof v !== "string") return undefined;
  const text = v.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = parseHttpDate(text, nowMs);
  return at === undefined ? undefined : Math.max(0, at - nowMs);
}

/** An HTTP-date in one of its three forms, as epoch ms; `undefined` for anything else. */
function parseHttpDate(text: string, nowMs: number): number | undefined {
  let m = IMF_FIXDATE.exec(text);
  if (m) return utc(Number(m[3]), m[2]!, m[1]!, m[4]!, m[5]!, m[6]!);
  m = ASCTIME_DATE.exec(text);
  if (m) return utc(Number(m[6]), m[1]!, m[2]!.trim(), m[3]!, m[4]!, m[5]!);
  m = RFC850_DATE.exec(text);
  if (!m) return undefined;
  // RFC 9110: a two-digit year more than 50 years ahead is the most recent past year with those digits.
  let year = 2000 + Number(m[3]);
  if (year > new Date(nowMs).getUTCFullYear() + 50) year -= 100;
  return utc(year, m[2]!, m[1]!, m[4]!, m[5]!, m[6]!);
}

function utc(
  year: number,
  month: string,
  day: string,
  h: string,
  min: string,
  s: string,
): number | undefined {
  const monthIndex = MONTHS.indexOf(month);
  const [d, hh, mm, ss] = [Number(day), Number(h), Number(min), Number(s)];
  // A leap second (60) is allowed by the grammar; Date.UTC carries it into the next minute.
  if (d < 1 || hh > 23 || mm > 59 || ss > 60) return undefined;
  // Date.UTC rolls 31 Feb over into March: a day the month does not have is malformed.
  if (new Date(Date.UTC(year, monthIndex, d)).getUTCDate() !== d) return undefined;
  return Date.UTC(year, monthIndex, d, hh, mm, ss);
}
