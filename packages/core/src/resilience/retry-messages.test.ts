/** What `RetryExhaustedError` and the `retry:unreachable` warning say: counts, rounded times, any thrown value. */
import { constant, isRetryExhaustedError, type RetryPolicy, retry, sleep, timeout } from "@keel/core";
import { createHarness } from "@keel/testing";
import { describe, expect, it } from "vitest";
import { describeThrown } from "../format-value.js";

async function exhaustion(thrown: unknown, policy: RetryPolicy, enclosingMs = Infinity): Promise<string> {
  const h = createHarness();
  const task = h.run(() =>
    timeout(
      enclosingMs,
      retry(
        function* flaky() {
          yield* sleep(0.25);
          throw thrown;
        },
        { retryOn: () => true, ...policy },
      ),
    ),
  );
  const error = await task.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!isRetryExhaustedError(error)) throw new Error(`expected RetryExhaustedError, got ${String(error)}`);
  return error.message;
}

describe("RetryExhaustedError's message", () => {
  it("counts attempts with their word and rounds the time", async () => {
    expect(await exhaustion(new Error("busy"), { backoff: constant(300), attempts: 10 }, 975)).toBe(
      "retry(flaky): the deadline leaves no time for another attempt after 4 attempts in 901 ms; last error: Error: busy",
    );
    expect(await exhaustion(new Error("busy"), { backoff: constant(300), attempts: 10 }, 500)).toBe(
      "retry(flaky): the deadline leaves no time for another attempt after 2 attempts in 301 ms; last error: Error: busy",
    );
    expect(
      await exhaustion(new Error("busy"), { backoff: constant(300), attempts: 10, budgetMs: 100.5 }),
    ).toBe("retry(flaky): its budget ran out after 1 attempt in 0 ms; last error: Error: busy");
    expect(await exhaustion(new Error("busy"), { backoff: constant(10), attempts: 3 })).toBe(
      "retry(flaky): all 3 attempts failed in 21 ms; last error: Error: busy",
    );
    expect(await exhaustion(new Error("busy"), { attempts: 1 })).toBe(
      "retry(flaky): its only attempt failed in 0 ms; last error: Error: busy",
    );
  });

  it("prints a thrown value that is not an Error readably, never [object Object]", async () => {
    const policy = { backoff: constant(0), attempts: 2 };
    expect(await exhaustion({ code: "E_BUSY", retryInMs: 5 }, policy)).toBe(
      'retry(flaky): all 2 attempts failed in 1 ms; last error: {"code":"E_BUSY","retryInMs":5}',
    );
    expect(await exhaustion("busy", policy)).toBe(
      'retry(flaky): all 2 attempts failed in 1 ms; last error: "busy"',
    );
    expect(await exhaustion(503, policy)).toBe(
      "retry(flaky): all 2 attempts failed in 1 ms; last error: 503",
    );
  });
});

describe("describeThrown", () => {
  const cyclic: { self?: unknown; n: number } = { n: 1 };
  cyclic.self = cyclic;
  it.each([
    [new TypeError("bad"), "TypeError: bad"],
    [{ name: "HttpError", message: "503" }, "HttpError: 503"],
    ["text", '"text"'],
    [42, "42"],
    [10n, "10n"],
    [undefined, "undefined"],
    [null, "null"],
    [Symbol("s"), "Symbol(s)"],
    [function named() {}, "[Function named]"],
    [{ a: 1, b: [2, 3] }, '{"a":1,"b":[2,3]}'],
    [{ big: 2n }, '{"big":"2n"}'],
    [cyclic, '{"n":1,"self":"[Circular]"}'],
    [new URL("http://127.0.0.1/x"), "http://127.0.0.1/x"],
    [Object.create(null), "{}"],
    [{ long: "x".repeat(300) }, `{"long":"${"x".repeat(190)}…`],
  ])("describes %s as %s", (value, text) => {
    expect(describeThrown(value)).toBe(text);
  });

  it("never throws, even for an object whose getters throw", () => {
    const hostile = {
      get name(): string {
        throw new Error("no");
      },
    };
    expect(describeThrown(hostile)).toBe("[object Object]");
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    expect(describeThrown(proxy)).toBe("[unknown value]");
  });
});
