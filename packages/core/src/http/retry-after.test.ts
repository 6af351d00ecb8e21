import { parseRetryAfter } from "@keel/core/http";
import { describe, expect, it } from "vitest";

const now = Date.parse("2025-01-01T00:00:00Z");

describe("parseRetryAfter", () => {
  it.each([
    ["0", 0],
    ["120", 120_000],
    [" 7 ", 7000],
    ["Wed, 01 Jan 2025 00:00:30 GMT", 30_000],
    ["Wednesday, 01-Jan-25 00:01:00 GMT", 60_000],
    ["Wed Jan  1 00:02:00 2025", 120_000],
    ["Wed Jan 01 00:02:00 2025", 120_000],
    ["Tue, 31 Dec 2024 23:59:00 GMT", 0],
    ["Tue, 31 Dec 2024 23:59:60 GMT", 0],
    ["Wed, 01 Jan 2025 00:00:59 GMT", 59_000],
    [["15", "Wed, 01 Jan 2025 00:00:30 GMT"], 15_000],
  ])("accepts %j as %d ms", (value, ms) => {
    expect(parseRetryAfter(value, now)).toBe(ms);
  });

  it.each([
    "retry 5",
    "soon 2",
    "soon",
    "",
    "-5",
    "1.5",
    "5s",
    "0x10",
    "1e3",
    "2025-01-01T00:00:30Z",
    "Wed, 1 Jan 2025 00:00:30 GMT",
    "Wed, 01 Jan 2025 00:00:30 UTC",
    "Wed, 01 Jan 2025 00:00:30",
    "wed, 01 jan 2025 00:00:30 GMT",
    "Wed, 01 Foo 2025 00:00:30 GMT",
    "Wed, 31 Feb 2025 00:00:30 GMT",
    "Wed, 01 Jan 2025 24:00:00 GMT",
    "Wed, 01 Jan 2025 00:60:00 GMT",
    "Wed, 01 Jan 2025 00:00:61 GMT",
    "Wed, 00 Jan 2025 00:00:30 GMT",
    "Wed,  01 Jan 2025 00:00:30 GMT",
    "Wed, 01-Jan-25 00:00:30 GMT",
    "Wednesday, 01 Jan 2025 00:00:30 GMT",
    "Wed Jan 1 00:02:00 2025",
    "Jan 1 2025",
    "01/01/2025",
  ])("ignores %j", (value) => {
    expect(parseRetryAfter(value, now)).toBeUndefined();
  });

  it("ignores a missing value, an empty list and a value of the wrong type", () => {
    expect(parseRetryAfter(undefined, now)).toBeUndefined();
    expect(parseRetryAfter([], now)).toBeUndefined();
    expect(parseRetryAfter(5 as never, now)).toBeUndefined();
  });

  it("reads an RFC 850 two-digit year as the most recent past year when it is more than 50 years ahead", () => {
    expect(parseRetryAfter("Thursday, 01-Jan-76 00:00:00 GMT", now)).toBe(0);
    expect(parseRetryAfter("Tuesday, 01-Jan-75 00:00:00 GMT", now)).toBe(Date.UTC(2075, 0, 1) - now);
  });
});
