/**
 * `isTransient`: the table of conformance case 100's Expect line, plus the forms its TSDoc names.
 */
import {
  BrokenCircuitError,
  isCancelled,
  isTransient,
  RetryExhaustedError,
  retry,
  retryableStatuses,
  suspend,
  TimeoutError,
  timeout,
} from "@keel/core";
import { createHarness } from "@keel/testing";
import { describe, expect, it } from "vitest";

function httpError(status: number): Error & { status: number } {
  return Object.assign(new Error(`HTTP ${status}`), { name: "HttpError", status });
}

function networkError(code: string, message = `connect ${code}`): Error & { code: string } {
  return Object.assign(new Error(message), { code });
}

describe("isTransient", () => {
  for (const status of [408, 425, 429, 500, 502, 503, 504]) {
    it(`is true for an error with HTTP status ${status}`, () => {
      expect(isTransient(httpError(status))).toBe(true);
    });
  }

  for (const status of [400, 401, 403, 404, 409, 422]) {
    it(`is false for an error with HTTP status ${status}`, () => {
      expect(isTransient(httpError(status))).toBe(false);
    });
  }

  it("is false for every status outside the retryable set, which holds exactly the seven", () => {
    expect([...retryableStatuses].sort()).toEqual([408, 425, 429, 500, 502, 503, 504]);
    const accepted: number[] = [];
    for (let status = 100; status < 600; status++) if (isTransient(httpError(status))) accepted.push(status);
    expect(accepted).toEqual([408, 425, 429, 500, 502, 503, 504]);
  });

  for (const code of ["ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT"]) {
    it(`is true for a network error with code ${code}`, () => {
      expect(isTransient(networkError(code))).toBe(true);
    });
  }

  it("is true for a socket hang up (a connection closed without a response)", () => {
    expect(isTransient(networkError("ECONNRESET", "socket hang up"))).toBe(true);
    expect(isTransient(new Error("socket hang up"))).toBe(true);
  });

  it("is true for the TimeoutError of an attempt's own timeout", async () => {
    const h = createHarness();
    let own: unknown;
    await h.run(function* attempt() {
      try {
        yield* timeout(10, suspend);
      } catch (e) {
        own = e;
      }
    });

    expect(own).toBeInstanceOf(TimeoutError);
    expect(isTransient(own)).toBe(true);
    await h.expectClean();
  });

  it("is false for Cancelled", async () => {
    const h = createHarness();
    let seen: unknown;
    const t = h.run(function* victim() {
      try {
        yield* suspend();
      } catch (e) {
        seen = e;
        throw e;
      }
    });
    h.clock.schedule(5, () => {
      t.cancel();
    });
    await t.then(
      () => undefined,
      () => undefined,
    );

    expect(isCancelled(seen)).toBe(true);
    expect(isTransient(seen)).toBe(false);
    await h.expectClean();
  });

  it("is false for programmer errors: TypeError, RangeError, SyntaxError", () => {
    expect(isTransient(new TypeError("x is undefined"))).toBe(false);
    expect(isTransient(new RangeError("bad length"))).toBe(false);
    expect(isTransient(new SyntaxError("Unexpected token"))).toBe(false);
  });

  it("is false for an inner retry's RetryExhaustedError, even when its cause is transient", async () => {
    const h = createHarness();
    let inner: unknown;
    await h.run(function* outer() {
      try {
        yield* retry(
          function* busy() {
            throw httpError(503);
          },
          { attempts: 1 },
        );
      } catch (e) {
        inner = e;
      }
    });

    expect(inner).toBeInstanceOf(RetryExhaustedError);
    expect(isTransient((inner as RetryExhaustedError).cause)).toBe(true);
    expect(isTransient(inner)).toBe(false);
    await h.expectClean();
  });

  it("is false for a BrokenCircuitError", () => {
    expect(isTransient(new BrokenCircuitError("db", "open"))).toBe(false);
  });

  it("is false for an error that says retryable: false, whatever else it says", () => {
    expect(isTransient(Object.assign(new Error("nope"), { retryable: false }))).toBe(false);
    expect(isTransient(Object.assign(httpError(503), { retryable: false }))).toBe(false);
    expect(isTransient(Object.assign(networkError("ECONNRESET"), { retryable: false }))).toBe(false);
  });

  it("is true for an error that says retryable: true", () => {
    expect(isTransient(Object.assign(new Error("try again"), { retryable: true }))).toBe(true);
  });

  it("is false for a plain error that carries no status, code or retryable flag", () => {
    expect(isTransient(new Error("boom"))).toBe(false);
  });

  it("is false for values that are not errors", () => {
    for (const v of [undefined, null, 503, "ECONNREFUSED", true])
      expect(isTransient(v), String(v)).toBe(false);
  });
});
