/**
 * `parseRetryAfter`: delay-seconds and the three HTTP-date forms of RFC 9110, nothing else; a value
 * it ignores leaves the pause to the backoff.
 */
import assert from "node:assert/strict";
import { parseRetryAfter } from "@keel/core/http";

const now = Date.parse("2025-01-01T00:00:00Z");
const cases: [string, number | undefined][] = [
  ["120", 120_000], // delay-seconds
  ["Wed, 01 Jan 2025 00:00:30 GMT", 30_000], // IMF-fixdate, the preferred form
  ["Wednesday, 01-Jan-25 00:01:00 GMT", 60_000], // obsolete RFC 850
  ["Wed Jan  1 00:02:00 2025", 120_000], // asctime
  ["Tue, 31 Dec 2024 23:00:00 GMT", 0], // in the past: retry now
  ["retry 5", undefined], // garbage: Date.parse would say 2001, that is "retry at once"
  ["soon 2", undefined],
  ["1.5", undefined], // delay-seconds are whole
  ["2025-01-01T00:00:30Z", undefined], // ISO 8601 is not an HTTP-date
];
for (const [header, ms] of cases) {
  const got = parseRetryAfter(header, now);
  console.log(
    `${JSON.stringify(header)} -> ${got === undefined ? "ignored (backoff decides)" : `${got} ms`}`,
  );
  assert.equal(got, ms);
}
console.log("retry-after: ok");
