import {
  BrokenCircuitError,
  type CircuitBreaker,
  constant,
  createCircuitBreaker,
  isBrokenCircuitError,
  isKeelError,
  isTransient,
  KeelError,
  type Operation,
  retry,
  sleep,
  spawn,
  suspend,
  TaskCancelledError,
  TimeoutError,
  timeout,
} from "@keel/core";
import { createHarness } from "@keel/testing";
import { describe, expect, it } from "vitest";

/** A dependency that counts its calls and fails or succeeds as told, after `ms`. */
function dependency() {
  let calls = 0;
  return {
    get calls() {
      return calls;
    },
    fail: (ms = 0, error: unknown = new Error("down")) =>
      function* failing(): Operation<never> {
        calls++;
        if (ms > 0) yield* sleep(ms);
        throw error;
      },
    ok: (ms = 0) =>
      function* succeeding(): Operation<string> {
        calls++;
        if (ms > 0) yield* sleep(ms);
        return "ok";
      },
  };
}

/** Runs `op` through `breaker` and describes the outcome in one word. */
function* attempt(breaker: CircuitBreaker, op: () => Operation<unknown>): Operation<string> {
  try {
    return String(yield* breaker.run(op));
  } catch (e) {
    if (isBrokenCircuitError(e)) return "broken";
    return e instanceof Error ? e.message : String(e);
  }
}

describe("createCircuitBreaker", () => {
  it("run works detached from its breaker (passed as a callback)", async () => {
    const h = createHarness();
    const breaker = createCircuitBreaker({ failureThreshold: 1, halfOpenAfterMs: 100 });
    const { run: through } = breaker;
    const ops = [
      function* one() {
        return 1;
      },
      function* two() {
        return 2;
      },
    ].map(through);
    const values = await h.run(function* () {
      const out: number[] = [];
      for (const op of ops) out.push(yield* op);
      return out;
    });
    expect(values).toEqual([1, 2]);
    expect(breaker.state).toBe("closed");
    await h.expectClean();
  });

  describe("closed to open", () => {
    it("opens at the failure threshold and then fails calls at once without running them", async () => {
      const h = createHarness();
      const breaker = createCircuitBreaker({ failureThreshold: 3, halfOpenAfterMs: 1000, name: "db" });
      const dep = dependency();
      const seen: string[] = [];
      await h.run(function* caller() {
        for (let i = 0; i < 4; i++) {
          seen.push(`${yield* attempt(breaker, dep.fail())} -> ${breaker.state}`);
        }
      });

      expect(seen).toEqual(["down -> closed", "down -> closed", "down -> open", "broken -> open"]);
      expect(dep.calls).toBe(3);
      expect(breaker.name).toBe("db");
      await h.expectClean();
    });

    it("counts consecutive failures: a success in between starts the count again", async () => {
      const h = createHarness();
      const breaker = createCircuitBreaker({ failureThreshold: 3, halfOpenAfterMs: 1000 });
      const dep = dependency();
      const seen: string[] = [];
      await h.run(function* caller() {
        for (const op of [dep.fail(), dep.fail(), dep.ok(), dep.fail(), dep.fail()]) {
          seen.push(yield* attempt(breaker, op));
        }
        seen.push(`state ${breaker.state}`);
        seen.push(yield* attempt(breaker, dep.fail()));
        seen.push(`state ${breaker.state}`);
      });

      expect(seen).toEqual(["down", "down", "ok", "down", "down", "state closed", "down", "state open"]);
      await h.expectClean();
    });

    it("with windowMs, counts only the failures within the window", async () => {
      const h = createHarness();
      const breaker = createCircuitBreaker({ failureThreshold: 3, windowMs: 1000, halfOpenAfterMs: 5000 });
      const dep = dependency();
      const seen: string[] = [];
      await h.run(function* caller() {
        for (const at of [0, 600, 1200, 1300]) {
          yield* sleep(at - h.clock.now());
          yield* attempt(breaker, dep.fail());
          seen.push(`${breaker.state}@${h.clock.now()}`);
        }
      });

      // At 1200 the failure at 0 has left the window; at 1300 those at 600, 1200 and 1300 are in it.
      expect(seen).toEqual(["closed@0", "closed@600", "closed@1200", "open@1300"]);
      await h.expectClean();
    });

    it("counts only the errors isFailure accepts", async () => {
      const h = createHarness();
      const breaker = createCircuitBreaker({
        failureThreshold: 1,
        halfOpenAfterMs: 1000,
        isFailure: (e) => ((e as { status?: number }).status ?? 0) >= 500,
      });
      const dep = dependency();
      const seen: string[] = [];
      await h.run(function* caller() {
        seen.push(
          yield* attempt(breaker, dep.fail(0, Object.assign(new Error("not found"), { status: 404 }))),
        );
        seen.push(`state ${breaker.state}`);
        seen.push(
          yield* attempt(breaker, dep.fail(0, Object.assign(new Error("unavailable"), { status: 503 }))),
        );
        seen.push(`state ${breaker.state}`);
      });

      expect(seen).toEqual(["not found", "state closed", "unavailable", "state open"]);
      await h.expectClean();
    });
  });

  describe("open to half-open", () => {
    it("lets exactly one probe through after halfOpenAfterMs, and its success closes the breaker", async () => {
      const h = createHarness();
      const breaker = createCircuitBreaker({ failureThreshold: 1, halfOpenAfterMs: 1000 });
      const dep = dependency();
      const seen: string[] = [];
      let brokenMessage = "";
      await h.run(function* caller() {
        seen.push(`${yield* attempt(breaker, dep.fail())} ${breaker.state}@${h.clock.now()}`);
        yield* sleep(999);
        seen.push(`${yield* attempt(breaker, dep.ok())} ${breaker.state}@${h.clock.now()}`);
        yield* sleep(1);
        seen.push(`state ${breaker.state}@${h.clock.now()}`);
        const probe = yield* spawn(function* probe() {
          const r = yield* attempt(breaker, dep.ok(50));
          seen.push(`probe ${r} ${breaker.state}@${h.clock.now()}`);
        });
        yield* sleep(10);
        try {
          yield* breaker.run(dep.ok());
        } catch (e) {
          if (!isBrokenCircuitError(e)) throw e;
          brokenMessage = e.message;
          seen.push(`second call broken ${breaker.state}@${h.clock.now()}`);
        }
        yield* probe;
        seen.push(`${yield* attempt(breaker, dep.ok())} ${breaker.state}@${h.clock.now()}`);
      });

      expect(seen).toEqual([
        "down open@0",
        "broken open@999",
        "state half-open@1000",
        "second call broken half-open@1010",
        "probe ok closed@1050",
        "ok closed@1050",
      ]);
      expect(brokenMessage).toMatch(/half-open/);
      expect(dep.calls).toBe(3);
      await h.expectClean();
    });

    it("a failed probe opens the breaker again for another halfOpenAfterMs from the failure", async () => {
      const h = createHarness();
      const breaker = createCircuitBreaker({ failureThreshold: 2, halfOpenAfterMs: 1000 });
      const dep = dependency();
      const seen: string[] = [];
      await h.run(function* caller() {
        yield* attempt(breaker, dep.fail());
        yield* attempt(breaker, dep.fail());
        yield* sleep(1000);
        seen.push(`probe ${yield* attempt(breaker, dep.fail(50))} ${breaker.state}@${h.clock.now()}`);
        yield* sleep(999);
        seen.push(`${yield* attempt(breaker, dep.ok())} ${breaker.state}@${h.clock.now()}`);
        yield* sleep(1);
        seen.push(`${yield* attempt(breaker, dep.ok())} ${breaker.state}@${h.clock.now()}`);
      });

      expect(seen).toEqual(["probe down open@1050", "broken open@2049", "ok closed@2050"]);
      expect(dep.calls).toBe(4);
      await h.expectClean();
    });

    it("computes its state from the clock: no timer is armed while it is open", async () => {
      const h = createHarness();
      const breaker = createCircuitBreaker({ failureThreshold: 1, halfOpenAfterMs: 1000 });
      const dep = dependency();
      const seen: string[] = [];
      await h.run(function* caller() {
        yield* attempt(breaker, dep.fail());
        seen.push(`${breaker.state}, timers ${h.clock.pendingTimers}@${h.clock.now()}`);
      });
      // Read from plain timers, with no call through the breaker in between.
      h.clock.schedule(999, () => seen.push(`${breaker.state}@999`));
      h.clock.schedule(1000, () => seen.push(`${breaker.state}@1000`));
      await h.run(function* idle() {
        yield* sleep(2000);
      });

      expect(seen).toEqual(["open, timers 0@0", "open@999", "half-open@1000"]);
      expect(dep.calls).toBe(1);
      await h.expectClean();
    });
  });

  describe("cancellation is neither a failure nor a success", () => {
    it("a call cancelled from outside, or cut by an enclosing timeout, does not count as a failure", async () => {
      const h = createHarness();
      const breaker = createCircuitBreaker({ failureThreshold: 1, halfOpenAfterMs: 1000 });
      const dep = dependency();
      const cancelled = h.run(function* cancelledCaller() {
        yield* breaker.run(suspend());
      });
      h.clock.schedule(10, () => void cancelled.cancel());
      const seen: string[] = [];
      const timed = h.run(function* timedCaller() {
        yield* sleep(20);
        try {
          yield* timeout(10, breaker.run(suspend()));
        } catch (e) {
          if (!(e instanceof TimeoutError)) throw e;
          seen.push(`timed out, ${breaker.state}@${h.clock.now()}`);
        }
        seen.push(`${yield* attempt(breaker, dep.ok())} ${breaker.state}`);
        seen.push(`${yield* attempt(breaker, dep.fail())} ${breaker.state}`);
      });

      await expect(cancelled).rejects.toBeInstanceOf(TaskCancelledError);
      await timed;
      expect(seen).toEqual(["timed out, closed@30", "ok closed", "down open"]);
      await h.expectClean();
    });

    it("a cancelled probe leaves the breaker half-open, and the next call is the probe", async () => {
      const h = createHarness();
      const breaker = createCircuitBreaker({ failureThreshold: 1, halfOpenAfterMs: 1000 });
      const dep = dependency();
      const seen: string[] = [];
      await h.run(function* caller() {
        yield* attempt(breaker, dep.fail());
        yield* sleep(1000);
        try {
          yield* timeout(20, breaker.run(dep.ok(100)));
        } catch (e) {
          if (!(e instanceof TimeoutError)) throw e;
          seen.push(`probe cut, ${breaker.state}@${h.clock.now()}`);
        }
        seen.push(`${yield* attempt(breaker, dep.ok())} ${breaker.state}@${h.clock.now()}`);
      });

      expect(seen).toEqual(["probe cut, half-open@1020", "ok closed@1020"]);
      expect(dep.calls).toBe(3);
      await h.expectClean();
    });

    it("a TimeoutError thrown by the operation's own timeout is a failure", async () => {
      const h = createHarness();
      const breaker = createCircuitBreaker({ failureThreshold: 1, halfOpenAfterMs: 1000 });
      const seen: string[] = [];
      await h.run(function* caller() {
        try {
          yield* breaker.run(timeout(10, suspend()));
        } catch (e) {
          seen.push(`${(e as Error).name} ${breaker.state}@${h.clock.now()}`);
        }
      });

      expect(seen).toEqual(["TimeoutError open@10"]);
      await h.expectClean();
    });
  });

  describe("BrokenCircuitError", () => {
    it("is a KeelError that says it is not retryable, and isTransient agrees", async () => {
      const h = createHarness();
      const breaker = createCircuitBreaker({ failureThreshold: 1, halfOpenAfterMs: 1000, name: "payments" });
      const dep = dependency();
      let caught: unknown;
      await h.run(function* caller() {
        yield* attempt(breaker, dep.fail());
        try {
          yield* breaker.run(dep.ok());
        } catch (e) {
          caught = e;
        }
      });

      expect(caught).toBeInstanceOf(BrokenCircuitError);
      expect(caught).toBeInstanceOf(KeelError);
      const e = caught as BrokenCircuitError;
      expect(e.name).toBe("BrokenCircuitError");
      expect(e.code).toBe("KEEL_BROKEN_CIRCUIT");
      expect(e.retryable).toBe(false);
      expect(e.message).toMatch(/payments/);
      expect(isKeelError(e)).toBe(true);
      expect(isBrokenCircuitError(e)).toBe(true);
      expect(isBrokenCircuitError(new Error("other"))).toBe(false);
      expect(isTransient(e)).toBe(false);
      await h.expectClean();
    });

    it("a retry loop around an open breaker gives up at once with the BrokenCircuitError", async () => {
      const h = createHarness();
      const breaker = createCircuitBreaker({ failureThreshold: 1, halfOpenAfterMs: 10_000 });
      const dep = dependency();
      let caught: unknown;
      await h.run(function* caller() {
        yield* attempt(breaker, dep.fail());
        try {
          yield* retry(() => breaker.run(dep.ok()), { attempts: 5, backoff: constant(10) });
        } catch (e) {
          caught = e;
          h.mark("gave up");
        }
      });

      expect(isBrokenCircuitError(caught)).toBe(true);
      expect(h.log).toEqual(["gave up@0"]);
      expect(h.eventsOf("retry:attempt")).toHaveLength(1);
      expect(dep.calls).toBe(1);
      await h.expectClean();
    });
  });

  describe("bad options", () => {
    it.each([
      ["failureThreshold 0", { failureThreshold: 0, halfOpenAfterMs: 1000 }, /failureThreshold/],
      ["failureThreshold 1.5", { failureThreshold: 1.5, halfOpenAfterMs: 1000 }, /failureThreshold/],
      ["failureThreshold NaN", { failureThreshold: Number.NaN, halfOpenAfterMs: 1000 }, /failureThreshold/],
      ["no failureThreshold", { halfOpenAfterMs: 1000 }, /failureThreshold/],
      ["halfOpenAfterMs -1", { failureThreshold: 1, halfOpenAfterMs: -1 }, /halfOpenAfterMs/],
      ["halfOpenAfterMs NaN", { failureThreshold: 1, halfOpenAfterMs: Number.NaN }, /halfOpenAfterMs/],
      [
        "halfOpenAfterMs Infinity",
        { failureThreshold: 1, halfOpenAfterMs: Number.POSITIVE_INFINITY },
        /halfOpenAfterMs/,
      ],
      ["no halfOpenAfterMs", { failureThreshold: 1 }, /halfOpenAfterMs/],
      ["windowMs -1", { failureThreshold: 1, halfOpenAfterMs: 1000, windowMs: -1 }, /windowMs/],
      ["windowMs NaN", { failureThreshold: 1, halfOpenAfterMs: 1000, windowMs: Number.NaN }, /windowMs/],
    ])("%s is a RangeError naming the option", (_name, options, message) => {
      const make = () => createCircuitBreaker(options as never);
      expect(make).toThrow(RangeError);
      expect(make).toThrow(message);
    });

    it("an isFailure that is not a function is a TypeError naming isFailure", () => {
      const make = () =>
        createCircuitBreaker({ failureThreshold: 1, halfOpenAfterMs: 10, isFailure: 3 as never });
      expect(make).toThrow(TypeError);
      expect(make).toThrow(/isFailure/);
    });

    it("run() rejects a value that is not an operation with a TypeError, at the call", () => {
      const breaker = createCircuitBreaker({ failureThreshold: 1, halfOpenAfterMs: 10 });
      expect(() => breaker.run(42 as never)).toThrow(TypeError);
    });
  });
});
