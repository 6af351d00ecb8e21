/** `timeout(ms, op, { label })` and `isDeadlineExceeded`: saying what ran out of time, and testing for it. */
import {
  constant,
  isDeadlineExceeded,
  isTimeoutError,
  RetryExhaustedError,
  retry,
  run,
  shield,
  sleep,
  suspend,
  TaskCancelledError,
  TimeoutError,
  timeout,
  timeoutAt,
} from "@keel/core";
import { type HttpPhase, HttpTimeoutError } from "@keel/core/http";
import { createHarness } from "@keel/testing";
import { describe, expect, it } from "vitest";

async function failure(p: PromiseLike<unknown>): Promise<unknown> {
  return p.then(
    () => {
      throw new Error("expected a failure");
    },
    (e: unknown) => e,
  );
}

describe("timeout's label", () => {
  it("names what timed out in the message, the error's label and the timeout:fire event", async () => {
    const h = createHarness();
    const error = await failure(h.run(() => timeout(200, sleep(1000), { label: "fetch orders" })));

    expect(isTimeoutError(error)).toBe(true);
    expect((error as TimeoutError).message).toBe("timeout(200, fetch orders): timed out after 200 ms");
    expect((error as TimeoutError).label).toBe("timeout(200, fetch orders)");
    expect(h.eventsOf("timeout:fire").map((e) => e.scope.label)).toEqual(["timeout(200, fetch orders)"]);
    await h.expectClean();
  });

  it("names a timeoutAt scope the same way, and one whose deadline has passed already", async () => {
    const h = createHarness();
    const fired = await failure(h.run(() => timeoutAt(50, sleep(100), { label: "sync stock" })));
    expect((fired as Error).message).toBe("timeoutAt(50, sync stock): timed out after 50 ms");
    const spent = await failure(h.run(() => timeoutAt(0, sleep(100), { label: "sync stock" })));
    expect((spent as TimeoutError).label).toBe("timeoutAt(0, sync stock)");
    await h.expectClean();
  });

  it("without a label (or with an empty options object) the scope is timeout(ms) as before", async () => {
    const h = createHarness();
    for (const options of [undefined, {}]) {
      const error = await failure(h.run(() => timeout(10, sleep(20), options)));
      expect((error as Error).message).toBe("timeout(10): timed out after 10 ms");
    }
    await h.expectClean();
  });

  it("rejects options that are not an object, and a label that is not a string, naming them", () => {
    expect(() => timeout(10, suspend, "fetch" as never)).toThrow(
      /^timeout\(ms, op, options\): expected an object/,
    );
    expect(() => timeout(10, suspend, { label: 42 as never })).toThrow(
      /^timeout\(ms, op, \{ label \}\): expected a string, got 42/,
    );
    expect(() => timeoutAt(10, suspend, { label: null as never })).toThrow(
      expect.objectContaining({ name: "TypeError", code: "KEEL_INVALID_ARGUMENT" }),
    );
  });
});

describe("isDeadlineExceeded", () => {
  const phases: HttpPhase[] = ["connect", "headers", "body", "total"];

  it("is true for a timeout's and a shield limit's TimeoutError", async () => {
    const h = createHarness();
    expect(isDeadlineExceeded(await failure(h.run(() => timeout(5, sleep(10)))))).toBe(true);
    const limited = await failure(h.run(() => shield(sleep(100), { limitMs: 5 })));
    expect(isTimeoutError(limited)).toBe(true);
    expect(isDeadlineExceeded(limited)).toBe(true);
    await h.expectClean();
  });

  it.each(phases)("is true for an HttpTimeoutError of the %s phase", (phase) => {
    const e = new HttpTimeoutError({ phase, timeoutMs: 10, deadline: 10, elapsedMs: 10, label: "GET /" });
    expect(isDeadlineExceeded(e)).toBe(true);
  });

  it("is true for a retry that ran out of its budget or of the deadline, false for one that ran out of attempts", async () => {
    const h = createHarness();
    function* busy() {
      yield* sleep(40);
      throw Object.assign(new Error("busy"), { status: 503 });
    }
    const byReason = async (op: () => ReturnType<typeof retry>) => {
      const e = await failure(h.run(op));
      expect(e).toBeInstanceOf(RetryExhaustedError);
      return [(e as RetryExhaustedError).reason, isDeadlineExceeded(e)];
    };
    expect(await byReason(() => retry(busy, { backoff: constant(50), budgetMs: 100 }))).toEqual([
      "budget",
      true,
    ]);
    expect(await byReason(() => timeout(85, retry(busy, { backoff: constant(50) })))).toEqual([
      "deadline",
      true,
    ]);
    expect(await byReason(() => retry(busy, { backoff: constant(5), attempts: 2 }))).toEqual([
      "attempts",
      false,
    ]);
    await h.expectClean();
  });

  it("is false for other errors, a cancellation's TaskCancelledError, and look-alikes that are not errors", async () => {
    const task = run(suspend);
    await task.cancel();
    const cancelled = await failure(task);
    expect(cancelled).toBeInstanceOf(TaskCancelledError);
    for (const e of [
      cancelled,
      new Error("busy"),
      Object.assign(new Error("x"), { code: "ETIMEDOUT" }),
      { code: "KEEL_TIMEOUT", message: "not an Error" },
      undefined,
      "KEEL_TIMEOUT",
    ])
      expect(isDeadlineExceeded(e)).toBe(false);
    expect(
      isDeadlineExceeded(new TimeoutError({ timeoutMs: 1, deadline: 1, elapsedMs: 1, label: "x" })),
    ).toBe(true);
  });
});
