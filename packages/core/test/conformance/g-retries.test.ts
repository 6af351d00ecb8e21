/**
 * Conformance, section G: retries, backoff and the total budget (cases 100–109 of
 * design/conformance.md). Every case runs on the harness's virtual clock with autojump, the random
 * source pinned to 0.5 unless a case says otherwise.
 *
 * The HTTP client and the fault server land with the HTTP issue. Until then, a case written against
 * `client.getJson("/r")` and a fault-server route runs against {@link createRoute}: an operation that
 * plays the route's response sequence (its n-th call answers the n-th element, by throwing an error
 * shaped like the HTTP layer's or by returning the body) and records the virtual arrival time of each
 * call. Retry-After parsing is the HTTP layer's job: here an error's `retryAfterMs` is what the loop sees.
 */
import {
  type Backoff,
  BrokenCircuitError,
  constant,
  createCircuitBreaker,
  exponential,
  fromDelays,
  isBrokenCircuitError,
  isCancelled,
  isRetryExhaustedError,
  isTimeoutError,
  isTransient,
  type Operation,
  RetryExhaustedError,
  type RetryInfo,
  race,
  deadline as readDeadline,
  remaining as readRemaining,
  retry,
  sleep,
  spawn,
  suspend,
  type Task,
  TaskCancelledError,
  TimeoutError,
  timeout,
  timeoutAt,
  withRandom,
} from "@keel/core";
import { createHarness, type Harness } from "@keel/testing";
import { describe, expect, it, vi } from "vitest";
import { rejectionOf } from "../support/errors.js";
import { retryEventCounts } from "../support/events.js";
import type { Outcome } from "../support/outcome.js";
import { cancelAtWithTimers } from "../support/timing.js";

/** The section's backoff: with random 0.5, delays 50, 100, 200, 400, 500, 500. */
const B = exponential({ baseMs: 100, factor: 2, maxMs: 1000, jitter: "full" });
const half = () => 0.5;

/** An error shaped like the HTTP layer's `HttpError` (`retryAfterMs` only when the response set it). */
type HttpLikeError = Error & { status: number; retryAfterMs?: number };
function httpError(status: number, retryAfterMs?: number): HttpLikeError {
  const e: HttpLikeError = Object.assign(new Error(`HTTP ${status}`), { name: "HttpError", status });
  if (retryAfterMs !== undefined) e.retryAfterMs = retryAfterMs;
  return e;
}

/**
 * One element of a route's response sequence: a status (200 answers the body, anything else throws
 * an HTTP error), the same with `retryAfterMs` or a delay, a listener that refuses the connection, or
 * a connection closed without a response.
 */
type Answer = number | "refuse" | "close" | { status: number; retryAfterMs?: number; delayMs?: number };

interface Route {
  /** Plays one request: the operation a `getJson("/r")` attempt stands for. */
  request(): Operation<{ ok: true }>;
  /** The virtual arrival time of each request. */
  readonly arrivals: number[];
  /** Every error the route answered, in order. */
  readonly thrown: unknown[];
}

/** A stand-in for a fault-server route; after the sequence ends, its last answer repeats. */
function createRoute(h: Harness, answers: readonly Answer[]): Route {
  const arrivals: number[] = [];
  const thrown: unknown[] = [];
  return {
    arrivals,
    thrown,
    *request() {
      const n = arrivals.length;
      arrivals.push(h.clock.now());
      const raw = answers[Math.min(n, answers.length - 1)]!;
      const answer = typeof raw === "number" ? { status: raw } : raw;
      let error: unknown;
      if (answer === "refuse") {
        error = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:9"), { code: "ECONNREFUSED" });
      } else if (answer === "close") {
        error = Object.assign(new Error("socket hang up"), { code: "ECONNRESET" });
      } else {
        if (answer.delayMs !== undefined) yield* sleep(answer.delayMs);
        if (answer.status === 200) return { ok: true };
        error = httpError(answer.status, answer.retryAfterMs);
      }
      thrown.push(error);
      throw error;
    },
  };
}

/** Runs `op` in a root task (random pinned to 0.5 unless given) and reports how and when it ended. */
async function outcomeOf<T>(
  h: Harness,
  op: () => Operation<T>,
  random: () => number = half,
): Promise<Outcome<T>> {
  return h.run(
    function* caller() {
      try {
        const value = yield* op();
        return { ok: true, value, at: h.clock.now(), timers: h.clock.pendingTimers };
      } catch (error) {
        return { ok: false, error, at: h.clock.now(), timers: h.clock.pendingTimers };
      }
    },
    { random },
  );
}

/** A route-free attempt that never settles, logging when it starts. */
function hangLogged(h: Harness) {
  return function* hang(): Operation<never> {
    h.mark("attempt");
    return yield* suspend();
  };
}

/** Lists the first `n` delays of a stepper at a fixed random value. */
function delays(b: Backoff, random: number, n = 6): number[] {
  const out: number[] = [];
  let state: Parameters<Backoff["next"]>[0];
  for (let i = 0; i < n; i++) {
    const step = b.next(state, () => random);
    out.push(step.delayMs);
    state = step.state;
  }
  return out;
}

describe("G. retries, backoff and the total budget", () => {
  describe("100: only retryable outcomes are retried", () => {
    // HTTP form (client.getJson against a fault-server route) lands with the HTTP issue.
    it("100 (a): a 503 then a 200 is retried once: requests at 0 and 50, the value at 50", async () => {
      const h = createHarness();
      const route = createRoute(h, [503, 200]);

      const r = await outcomeOf(h, () => retry(route.request, { attempts: 5, backoff: B }));

      expect(r).toEqual({ ok: true, value: { ok: true }, at: 50, timers: 0 });
      expect(route.arrivals).toEqual([0, 50]);
      await h.expectClean();
    });

    // HTTP form lands with the HTTP issue.
    it("100 (b): a 404 is thrown unwrapped at 0 after one request, with no backoff timer armed", async () => {
      const h = createHarness();
      const route = createRoute(h, [404]);

      const r = await outcomeOf(h, () => retry(route.request, { attempts: 5, backoff: B }));

      expect(r).toMatchObject({ ok: false, at: 0, timers: 0 });
      expect(r.error).toBe(route.thrown[0]);
      expect(r.error).toMatchObject({ name: "HttpError", status: 404 });
      expect(route.arrivals).toEqual([0]);
      expect(h.eventsOf("retry:sleep")).toHaveLength(0);
      await h.expectClean();
    });

    // HTTP form lands with the HTTP issue.
    it("100 (c): 429, 500, 502 and 504 are all retried: requests at 0, 50, 150, 350, 750, the value at 750", async () => {
      const h = createHarness();
      const route = createRoute(h, [429, 500, 502, 504, 200]);

      const r = await outcomeOf(h, () => retry(route.request, { attempts: 5, backoff: B }));

      expect(r).toEqual({ ok: true, value: { ok: true }, at: 750, timers: 0 });
      expect(route.arrivals).toEqual([0, 50, 150, 350, 750]);
      await h.expectClean();
    });

    // HTTP form lands with the HTTP issue: "close without response" is a socket hang up (ECONNRESET).
    it("100 (d): a connection closed without a response is transient: 2 requests, the value at 50", async () => {
      const h = createHarness();
      const route = createRoute(h, ["close", 200]);

      const r = await outcomeOf(h, () => retry(route.request, { attempts: 5, backoff: B }));

      expect(r).toEqual({ ok: true, value: { ok: true }, at: 50, timers: 0 });
      expect(route.arrivals).toEqual([0, 50]);
      await h.expectClean();
    });

    // HTTP form lands with the HTTP issue: a listener that refuses connections.
    it("100 (e): refused connections run out of attempts: RetryExhaustedError at 50 caused by ECONNREFUSED", async () => {
      const h = createHarness();
      const route = createRoute(h, ["refuse"]);

      const r = await outcomeOf(h, () => retry(route.request, { attempts: 2, backoff: B }));

      expect(route.arrivals).toEqual([0, 50]);
      expect(r).toMatchObject({ ok: false, at: 50, timers: 0 });
      expect(r.error).toBeInstanceOf(RetryExhaustedError);
      expect(r.error).toMatchObject({ reason: "attempts", attempts: 2 });
      const cause = (r.error as RetryExhaustedError).cause;
      expect(cause).toBe(route.thrown[1]);
      expect(cause).toMatchObject({ code: "ECONNREFUSED" });
      await h.expectClean();
    });

    // HTTP form lands with the HTTP issue.
    it("100 (f): a 404 after a retried 503 is thrown itself, unwrapped, at 50 after 2 requests", async () => {
      const h = createHarness();
      const route = createRoute(h, [503, 404]);

      const r = await outcomeOf(h, () => retry(route.request, { attempts: 5, backoff: B }));

      expect(r).toMatchObject({ ok: false, at: 50, timers: 0 });
      expect(r.error).toBe(route.thrown[1]);
      expect(r.error).not.toBeInstanceOf(RetryExhaustedError);
      expect(r.error).toMatchObject({ status: 404 });
      expect(route.arrivals).toEqual([0, 50]);
      expect(h.eventsOf("retry:attempt").map((e) => [e.attempt, e.at])).toEqual([
        [1, 0],
        [2, 50],
      ]);
      const sleeps = h.eventsOf("retry:sleep");
      expect(sleeps).toHaveLength(1);
      expect(sleeps[0]!.error).toBe(route.thrown[0]);
      await h.expectClean();
    });

    it("100: isTransient accepts the retryable statuses, network errors and TimeoutError, and nothing else listed", async () => {
      const h = createHarness();
      const own = await rejectionOf(h.run(() => timeout(10, suspend)));
      expect(own).toBeInstanceOf(TimeoutError);
      const inner = new RetryExhaustedError({
        reason: "attempts",
        attempts: 2,
        elapsedMs: 0,
        history: [],
        cause: httpError(503),
        label: "retry(inner)",
      });
      let cancelled: unknown;
      const t = h.run(function* victim() {
        try {
          yield* suspend();
        } catch (e) {
          cancelled = e;
          throw e;
        }
      });
      await cancelAtWithTimers(h, t, 5);
      expect(await rejectionOf(t)).toBeInstanceOf(TaskCancelledError);
      expect(isCancelled(cancelled)).toBe(true);

      const transient = [408, 425, 429, 500, 502, 503, 504].map((s) => isTransient(httpError(s)));
      const network = ["ECONNREFUSED", "ECONNRESET"].map((code) =>
        isTransient(Object.assign(new Error(code), { code })),
      );
      const permanent = [400, 401, 403, 404, 409, 422].map((s) => isTransient(httpError(s)));
      const others = [
        cancelled,
        new TypeError("x is undefined"),
        new RangeError("bad"),
        new SyntaxError("bad"),
        inner,
        Object.assign(new Error("nope"), { retryable: false }),
      ].map(isTransient);

      expect(transient).toEqual([true, true, true, true, true, true, true]);
      expect(network).toEqual([true, true]);
      expect(isTransient(own)).toBe(true);
      expect(permanent).toEqual([false, false, false, false, false, false]);
      expect(others).toEqual([false, false, false, false, false, false]);
      await h.expectClean();
    });
  });

  describe("101: attempts counts the original call; the defaults", () => {
    // HTTP form lands with the HTTP issue.
    it("101 (a): three attempts mean requests at 0, 50, 150 and RetryExhaustedError at 150 with the history", async () => {
      const h = createHarness();
      const route = createRoute(h, [503]);

      const r = await outcomeOf(h, () => retry(route.request, { attempts: 3, backoff: B }));

      expect(route.arrivals).toEqual([0, 50, 150]);
      expect(r).toMatchObject({ ok: false, at: 150, timers: 0 });
      const e = r.error as RetryExhaustedError;
      expect(e).toBeInstanceOf(RetryExhaustedError);
      expect(e).toMatchObject({ reason: "attempts", attempts: 3, elapsedMs: 150 });
      expect(e.cause).toBe(route.thrown[2]);
      expect(e.cause).toMatchObject({ status: 503 });
      expect(e.history).toEqual([
        { attempt: 1, startedAt: 0, endedAt: 0, error: route.thrown[0], delayMs: 50, delayReason: "backoff" },
        {
          attempt: 2,
          startedAt: 50,
          endedAt: 50,
          error: route.thrown[1],
          delayMs: 100,
          delayReason: "backoff",
        },
        { attempt: 3, startedAt: 150, endedAt: 150, error: route.thrown[2] },
      ]);
      expect(e.history[2]!.delayMs).toBeUndefined();
      expect(retryEventCounts(h)).toEqual({ attempt: 3, sleep: 2, giveup: 1, unreachable: 0 });
      expect(h.eventsOf("retry:sleep").map((s) => [s.at, s.delayMs])).toEqual([
        [0, 50],
        [50, 100],
      ]);
      await h.expectClean();
    });

    it("101 (b): with no policy, 5 attempts at 0, 100, 300, 700, 1500 under the default backoff", async () => {
      const h = createHarness();
      const starts: number[] = [];
      let last: unknown;

      const r = await outcomeOf(h, () =>
        retry(function* alwaysBusy() {
          starts.push(h.clock.now());
          last = httpError(503);
          throw last;
        }),
      );

      expect(starts).toEqual([0, 100, 300, 700, 1500]);
      expect(r).toMatchObject({ ok: false, at: 1500, timers: 0 });
      expect(r.error).toBeInstanceOf(RetryExhaustedError);
      expect(r.error).toMatchObject({ reason: "attempts", attempts: 5 });
      expect((r.error as RetryExhaustedError).cause).toBe(last);
      await h.expectClean();
    });

    for (const attempts of [0, -1, Number.NaN, 1.5]) {
      it(`101 (c): attempts ${attempts} is a RangeError naming attempts, thrown before op starts`, async () => {
        const h = createHarness();
        let calls = 0;
        function* op(): Operation<string> {
          calls++;
          return "ran";
        }

        const r = await outcomeOf(h, () => retry(op, { attempts }));

        expect(r).toMatchObject({ ok: false, at: 0, timers: 0 });
        expect(r.error).toBeInstanceOf(RangeError);
        expect((r.error as Error).message).toMatch(/attempts/);
        expect(calls).toBe(0);
        expect(h.eventsOf("retry:attempt")).toHaveLength(0);
        await h.expectClean();
      });
    }
  });

  describe("102: capped exponential backoff with jitter, as pure steppers", () => {
    const b = (jitter: "full" | "equal" | "decorrelated" | "none") =>
      exponential({ baseMs: 100, factor: 2, maxMs: 1000, jitter });

    it("102: full jitter gives half the capped delay at 0.5 and 0.999 of it at 0.999", () => {
      expect(delays(b("full"), 0.5)).toEqual([50, 100, 200, 400, 500, 500]);
      expect(delays(b("full"), 0.999)).toEqual([99.9, 199.8, 399.6, 799.2, 999, 999]);
    });

    it("102: no jitter gives the capped delays; equal jitter gives t/2 + random·t/2", () => {
      expect(delays(b("none"), 0.5)).toEqual([100, 200, 400, 800, 1000, 1000]);
      expect(delays(b("none"), 0.999)).toEqual([100, 200, 400, 800, 1000, 1000]);
      expect(delays(b("equal"), 0.5)).toEqual([75, 150, 300, 600, 750, 750]);
    });

    it("102: decorrelated jitter stays within [baseMs, maxMs]", () => {
      for (const r of [0, 0.25, 0.5, 0.75, 0.999]) {
        for (const d of delays(b("decorrelated"), r, 12)) {
          expect(d).toBeGreaterThanOrEqual(100);
          expect(d).toBeLessThanOrEqual(1000);
        }
      }
    });

    it("102: constant(250) gives 250 each time and fromDelays([10, 20, 40]) gives 10, 20, 40", () => {
      expect(delays(constant(250), 0.5)).toEqual([250, 250, 250, 250, 250, 250]);
      expect(delays(fromDelays([10, 20, 40]), 0.5, 3)).toEqual([10, 20, 40]);
    });

    it("102: no delay is negative or above maxMs, and the same state and random give the same delay", () => {
      for (const jitter of ["full", "equal", "decorrelated", "none"] as const) {
        for (const r of [0, 0.5, 0.999]) {
          let state: Parameters<Backoff["next"]>[0];
          for (let i = 0; i < 8; i++) {
            const first = b(jitter).next(state, () => r);
            const again = b(jitter).next(state, () => r);
            expect(again).toEqual(first);
            expect(first.delayMs).toBeGreaterThanOrEqual(0);
            expect(first.delayMs).toBeLessThanOrEqual(1000);
            state = first.state;
          }
        }
      }
    });

    it("102: baseMs NaN is a RangeError naming baseMs", () => {
      expect(() => exponential({ baseMs: Number.NaN })).toThrow(RangeError);
      expect(() => exponential({ baseMs: Number.NaN })).toThrow(/baseMs/);
    });

    it("102: a retry with the source pinned to 0.999 sleeps 99.9 then 199.8 and never calls Math.random", async () => {
      const spy = vi.spyOn(Math, "random").mockImplementation(() => {
        throw new Error("Math.random was called");
      });
      try {
        const h = createHarness();
        const starts: number[] = [];

        const r = await outcomeOf(
          h,
          () =>
            retry(
              function* busy() {
                starts.push(h.clock.now());
                throw httpError(503);
              },
              { attempts: 3, backoff: B },
            ),
          () => 0.999,
        );

        expect(h.eventsOf("retry:sleep").map((e) => e.delayMs)).toEqual([99.9, 199.8]);
        expect(starts).toEqual([0, 99.9, 99.9 + 199.8]);
        expect(r.error).toBeInstanceOf(RetryExhaustedError);
        expect(r.error).toMatchObject({ reason: "attempts", attempts: 3 });
        expect(spy).not.toHaveBeenCalled();
        await h.expectClean();
      } finally {
        spy.mockRestore();
      }
    });
  });

  describe("103: a cancellation is never retried", () => {
    it("103: cancelling during attempt 2 throws Cancelled into it at 150 and starts no attempt 3", async () => {
      const h = createHarness();
      const first = httpError(503);
      const retryOnSaw: unknown[] = [];
      let onRetryCalls = 0;
      let calls = 0;
      let seenInAttempt2: unknown;
      const t = h.run(
        function* caller() {
          return yield* retry(
            function* attempt() {
              calls++;
              h.mark(`a${calls}`);
              if (calls === 1) throw first;
              try {
                yield* suspend();
              } catch (e) {
                seenInAttempt2 = e;
                throw e;
              } finally {
                h.mark("a2.fin");
              }
            },
            {
              attempts: 5,
              backoff: B,
              retryOn: (e) => {
                retryOnSaw.push(e);
                return true;
              },
              onRetry: () => {
                onRetryCalls++;
              },
            },
          );
        },
        { random: half },
      );

      const cancelled = cancelAtWithTimers(h, t, 150);
      const error = await rejectionOf(t);

      expect(await cancelled).toEqual({ at: 150, timers: 0 });
      expect(h.log).toEqual(["a1@0", "a2@50", "a2.fin@150"]);
      expect(isCancelled(seenInAttempt2)).toBe(true);
      expect(retryOnSaw).toHaveLength(1);
      expect(retryOnSaw[0]).toBe(first);
      expect(onRetryCalls).toBe(1);
      expect(t.state).toBe("cancelled");
      expect(error).toBeInstanceOf(TaskCancelledError);
      expect(retryEventCounts(h)).toEqual({ attempt: 2, sleep: 1, giveup: 0, unreachable: 0 });
      await h.expectClean();
    });

    // Decision (issue 11, semantics §2 "an error beats a cancellation"): the conformance text reads
    // this variant as a swallow that ends the task cancelled; an attempt that replaces the unwinding
    // `Cancelled` with an error is the same as a `finally` that throws, so the error propagates
    // unchanged, as it would without `retry`, and the loop still stops at once.
    it("103 (variant): an attempt that turns Cancelled into a transient error still stops the loop at 150; the error beats the cancellation", async () => {
      const h = createHarness();
      let calls = 0;
      const t = h.run(
        function* caller() {
          return yield* retry(
            function* attempt() {
              calls++;
              h.mark(`a${calls}`);
              if (calls === 1) throw httpError(503);
              try {
                yield* suspend();
              } catch {
                throw httpError(503);
              } finally {
                h.mark(`a${calls}.fin`);
              }
            },
            { attempts: 5, backoff: B, retryOn: () => true },
          );
        },
        { random: half },
      );

      const cancelled = cancelAtWithTimers(h, t, 150);
      const error = await rejectionOf(t);

      expect(await cancelled).toEqual({ at: 150, timers: 0 });
      expect(h.log).toEqual(["a1@0", "a2@50", "a2.fin@150"]);
      expect(t.state).toBe("failed");
      expect(error).toMatchObject({ status: 503 });
      expect(h.eventsOf("cleanup:swallow")).toEqual([]);
      expect(h.eventsOf("cancel:replaced").map((e) => [e.error, e.reason.kind, e.at])).toEqual([
        [error, "cancel", 150],
      ]);
      expect(retryEventCounts(h)).toEqual({ attempt: 2, sleep: 1, giveup: 0, unreachable: 0 });
      await h.expectClean();
    });
  });

  describe("104: a cancellation during backoff stops at once", () => {
    // HTTP form lands with the HTTP issue.
    it("104: cancelling at 20 aborts the backoff sleep due at 50, and attempt 2 never starts", async () => {
      const h = createHarness();
      const route = createRoute(h, [503, 200]);
      const t = h.run(() => retry(route.request, { attempts: 5, backoff: B }), { random: half });

      const cancelled = cancelAtWithTimers(h, t, 20);
      const error = await rejectionOf(t);

      expect(await cancelled).toEqual({ at: 20, timers: 0 });
      expect(route.arrivals).toEqual([0]);
      expect(t.state).toBe("cancelled");
      expect(error).toBeInstanceOf(TaskCancelledError);
      expect(retryEventCounts(h)).toEqual({ attempt: 1, sleep: 1, giveup: 0, unreachable: 0 });
      await h.expectClean();
    });

    // HTTP form (a 503 with `Retry-After: 2`) lands with the HTTP issue.
    it("104 (Retry-After): a 2000 ms Retry-After sleep cancelled at 20 stops at 20 after one request", async () => {
      const h = createHarness();
      const route = createRoute(h, [{ status: 503, retryAfterMs: 2000 }, 200]);
      const t = h.run(() => retry(route.request, { attempts: 5, backoff: B }), { random: half });

      const cancelled = cancelAtWithTimers(h, t, 20);
      const error = await rejectionOf(t);

      expect(await cancelled).toEqual({ at: 20, timers: 0 });
      expect(route.arrivals).toEqual([0]);
      expect(h.eventsOf("retry:sleep").map((e) => [e.delayMs, e.delayReason])).toEqual([
        [2000, "retry-after"],
      ]);
      expect(t.state).toBe("cancelled");
      expect(error).toBeInstanceOf(TaskCancelledError);
      expect(retryEventCounts(h)).toEqual({ attempt: 1, sleep: 1, giveup: 0, unreachable: 0 });
      await h.expectClean();
    });

    // HTTP form lands with the HTTP issue.
    it("104 (race): race([retry, sleep(20)]) returns the sleep's value at 20 after the retry has unwound", async () => {
      const h = createHarness();
      const route = createRoute(h, [503, 200]);

      const t = h.run(
        function* caller() {
          const v = yield* race([
            function* retrying() {
              try {
                return yield* retry(route.request, { attempts: 5, backoff: B });
              } finally {
                h.mark("retry.unwound");
              }
            },
            sleep(20),
          ]);
          h.mark(`race returned ${String(v)}`);
          return v;
        },
        { random: half },
      );

      expect(await t).toBeUndefined();
      expect(h.log).toEqual(["retry.unwound@20", "race returned undefined@20"]);
      expect(route.arrivals).toEqual([0]);
      expect(retryEventCounts(h)).toEqual({ attempt: 1, sleep: 1, giveup: 0, unreachable: 0 });
      await h.expectClean();
    });
  });

  it("105: per-attempt TimeoutErrors are retried, and the enclosing timeout wins at 5000 unseen by the loop", async () => {
    const h = createHarness();
    const retries: RetryInfo[] = [];
    let seenByCaller: unknown;
    let caught: unknown;
    let afterCatch = { at: -1, count: -1, state: "" };
    const t: Task<void> = h.run(
      function* caller() {
        try {
          yield* timeout(5000, function* guarded() {
            try {
              return yield* retry(hangLogged(h), {
                attempts: 10,
                perAttemptMs: 1000,
                backoff: B,
                onRetry: (i) => retries.push(i),
              });
            } catch (e) {
              seenByCaller = e;
              throw e;
            }
          });
        } catch (e) {
          caught = e;
          afterCatch = { at: h.clock.now(), count: t.cancellationCount, state: t.state };
        }
      },
      { random: half },
    );

    await t;

    expect(h.log).toEqual(["attempt@0", "attempt@1050", "attempt@2150", "attempt@3350", "attempt@4750"]);
    expect(
      retries.map((i) => [
        i.attempt,
        i.elapsedMs,
        i.timedOut,
        i.delayMs,
        (i.error as TimeoutError).timeoutMs,
      ]),
    ).toEqual([
      [1, 1000, true, 50, 1000],
      [2, 2050, true, 100, 1000],
      [3, 3150, true, 200, 1000],
      [4, 4350, true, 400, 1000],
    ]);
    expect(retries.every((i) => isTimeoutError(i.error))).toBe(true);
    expect(caught).toBeInstanceOf(TimeoutError);
    expect(caught).not.toBeInstanceOf(RetryExhaustedError);
    expect(caught).toMatchObject({ timeoutMs: 5000, deadline: 5000 });
    expect(isCancelled(seenByCaller)).toBe(true);
    expect(afterCatch).toEqual({ at: 5000, count: 0, state: "running" });
    expect(retryEventCounts(h)).toEqual({ attempt: 5, sleep: 4, giveup: 0, unreachable: 0 });
    await h.expectClean();
  });

  describe("106: the inverted-order incident is detected and reported", () => {
    it("106: a per-attempt limit above the enclosing timeout is clamped, warned about once at 0, and the outer wins at 5000", async () => {
      const h = createHarness();
      let onRetryCalls = 0;
      const r = await outcomeOf(h, () =>
        timeout(
          5000,
          retry(hangLogged(h), {
            attempts: 3,
            perAttemptMs: 10000,
            backoff: B,
            onRetry: () => {
              onRetryCalls++;
            },
          }),
        ),
      );

      expect(r).toMatchObject({ ok: false, at: 5000, timers: 0 });
      expect(r.error).toBeInstanceOf(TimeoutError);
      expect(r.error).toMatchObject({ timeoutMs: 5000, deadline: 5000 });
      expect(h.log).toEqual(["attempt@0"]);
      expect(onRetryCalls).toBe(0);
      const warnings = h.eventsOf("retry:unreachable");
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatchObject({ at: 0, perAttemptMs: 10000, availableMs: 5000, attempts: 3 });
      expect(warnings[0]!.message).toMatch(/10000/);
      expect(warnings[0]!.message).toMatch(/5000/);
      expect(retryEventCounts(h)).toEqual({ attempt: 1, sleep: 0, giveup: 0, unreachable: 1 });
      await h.expectClean();
    });

    it("106 (variant): with budgetMs 5000 instead, RetryExhaustedError(budget, 1 attempt) at 5000, caused by the budget's TimeoutError", async () => {
      const h = createHarness();
      const r = await outcomeOf(h, () =>
        retry(hangLogged(h), { attempts: 3, budgetMs: 5000, perAttemptMs: 10000, backoff: B }),
      );

      expect(r).toMatchObject({ ok: false, at: 5000, timers: 0 });
      expect(r.error).toBeInstanceOf(RetryExhaustedError);
      expect(r.error).toMatchObject({ reason: "budget", attempts: 1 });
      const cause = (r.error as RetryExhaustedError).cause;
      expect(isTimeoutError(cause)).toBe(true);
      expect(cause).toMatchObject({ timeoutMs: 5000, deadline: 5000 });
      expect(h.log).toEqual(["attempt@0"]);
      const warnings = h.eventsOf("retry:unreachable");
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatchObject({ at: 0, perAttemptMs: 10000, availableMs: 5000 });
      await h.expectClean();
    });
  });

  it("107: the per-attempt timeout is clamped to the enclosing deadline, and the outer claim wins at 5000", async () => {
    const h = createHarness();
    let calls = 0;
    let inAttempt3: { remaining: number; deadline: number } | null = null;
    let onRetryCalls = 0;

    const r = await outcomeOf(h, () =>
      timeoutAt(
        5000,
        retry(
          function* attempt() {
            calls++;
            h.mark(`attempt ${calls}`);
            if (calls === 3)
              inAttempt3 = { remaining: yield* readRemaining(), deadline: yield* readDeadline() };
            return yield* suspend();
          },
          {
            attempts: 5,
            perAttemptMs: 2000,
            backoff: constant(100),
            onRetry: () => {
              onRetryCalls++;
            },
          },
        ),
      ),
    );

    expect(h.log).toEqual(["attempt 1@0", "attempt 2@2100", "attempt 3@4200"]);
    expect(h.eventsOf("retry:sleep").map((e) => e.at)).toEqual([2000, 4100]);
    expect(inAttempt3).toEqual({ remaining: 800, deadline: 5000 });
    expect(r).toMatchObject({ ok: false, at: 5000, timers: 0 });
    expect(r.error).toBeInstanceOf(TimeoutError);
    expect(r.error).toMatchObject({ deadline: 5000 });
    expect(onRetryCalls).toBe(2);
    expect(retryEventCounts(h)).toEqual({ attempt: 3, sleep: 2, giveup: 0, unreachable: 0 });
    await h.expectClean();
  });

  describe("108: Retry-After is honoured, within the budget", () => {
    // HTTP form (429 with `Retry-After: 2`) lands with the HTTP issue.
    it("108 (a): a 2000 ms Retry-After replaces the computed 50 ms and is not capped by maxMs", async () => {
      const h = createHarness();
      const route = createRoute(h, [{ status: 429, retryAfterMs: 2000 }, 200]);
      const retries: RetryInfo[] = [];

      const r = await outcomeOf(h, () =>
        retry(route.request, { attempts: 5, backoff: B, onRetry: (i) => retries.push(i) }),
      );

      expect(route.arrivals).toEqual([0, 2000]);
      expect(r).toEqual({ ok: true, value: { ok: true }, at: 2000, timers: 0 });
      expect(retries.map((i) => [i.delayMs, i.delayReason])).toEqual([[2000, "retry-after"]]);
      await h.expectClean();
    });

    // HTTP form lands with the HTTP issue.
    it("108 (a, history): the history records the 2000 ms delay as chosen because of Retry-After", async () => {
      const h = createHarness();
      const route = createRoute(h, [{ status: 429, retryAfterMs: 2000 }, 503]);

      const r = await outcomeOf(h, () => retry(route.request, { attempts: 2, backoff: B }));

      expect(route.arrivals).toEqual([0, 2000]);
      expect(r).toMatchObject({ ok: false, at: 2000 });
      const e = r.error as RetryExhaustedError;
      expect(e).toBeInstanceOf(RetryExhaustedError);
      expect(e.history[0]).toMatchObject({ delayMs: 2000, delayReason: "retry-after" });
      await h.expectClean();
    });

    // HTTP form (503 with `Retry-After: 10`) lands with the HTTP issue.
    it("108 (b): a Retry-After beyond budgetMs gives up at 0 with reason budget, starting no sleep", async () => {
      const h = createHarness();
      const route = createRoute(h, [{ status: 503, retryAfterMs: 10000 }, 200]);

      const r = await outcomeOf(h, () => retry(route.request, { attempts: 5, budgetMs: 3000, backoff: B }));

      expect(route.arrivals).toEqual([0]);
      expect(r).toMatchObject({ ok: false, at: 0, timers: 0 });
      expect(r.error).toBeInstanceOf(RetryExhaustedError);
      expect(r.error).toMatchObject({ reason: "budget", attempts: 1 });
      const cause = (r.error as RetryExhaustedError).cause;
      expect(cause).toBe(route.thrown[0]);
      expect(cause).toMatchObject({ status: 503, retryAfterMs: 10000 });
      expect(h.eventsOf("retry:sleep")).toHaveLength(0);
      await h.expectClean();
    });

    // HTTP form lands with the HTTP issue.
    it("108 (b, enclosing): the same under timeout(3000) gives up at 0 with reason deadline", async () => {
      const h = createHarness();
      const route = createRoute(h, [{ status: 503, retryAfterMs: 10000 }, 200]);

      const r = await outcomeOf(h, () => timeout(3000, retry(route.request, { attempts: 5, backoff: B })));

      expect(route.arrivals).toEqual([0]);
      expect(r).toMatchObject({ ok: false, at: 0, timers: 0 });
      expect(r.error).toBeInstanceOf(RetryExhaustedError);
      expect(r.error).toMatchObject({ reason: "deadline", attempts: 1 });
      const cause = (r.error as RetryExhaustedError).cause;
      expect(cause).toBe(route.thrown[0]);
      expect(cause).toMatchObject({ status: 503, retryAfterMs: 10000 });
      expect(h.eventsOf("retry:sleep")).toHaveLength(0);
      await h.expectClean();
    });

    // HTTP form (`Retry-After: -1` / `soon`, which the HTTP layer leaves as retryAfterMs undefined) lands
    // with the HTTP issue.
    for (const [form, error] of [
      ["absent", () => httpError(503)],
      ["undefined", () => Object.assign(httpError(503), { retryAfterMs: undefined })],
    ] as const) {
      it(`108 (c): with retryAfterMs ${form}, the next request comes at 50 by backoff`, async () => {
        const h = createHarness();
        const arrivals: number[] = [];

        const r = await outcomeOf(h, () =>
          retry(
            function* request() {
              arrivals.push(h.clock.now());
              if (arrivals.length === 1) throw error();
              return { ok: true };
            },
            { attempts: 5, backoff: B },
          ),
        );

        expect(arrivals).toEqual([0, 50]);
        expect(r).toEqual({ ok: true, value: { ok: true }, at: 50, timers: 0 });
        expect(h.eventsOf("retry:sleep").map((e) => [e.delayMs, e.delayReason])).toEqual([[50, "backoff"]]);
        await h.expectClean();
      });
    }

    // HTTP form lands with the HTTP issue.
    it("108 (d): a Retry-After after the last attempt is not slept: RetryExhaustedError(attempts, 2) at 1000", async () => {
      const h = createHarness();
      const route = createRoute(h, [
        { status: 503, retryAfterMs: 1000 },
        { status: 503, retryAfterMs: 1000 },
        200,
      ]);

      const r = await outcomeOf(h, () => retry(route.request, { attempts: 2, backoff: B }));

      expect(route.arrivals).toEqual([0, 1000]);
      expect(r).toMatchObject({ ok: false, at: 1000, timers: 0 });
      expect(r.error).toBeInstanceOf(RetryExhaustedError);
      expect(r.error).toMatchObject({ reason: "attempts", attempts: 2 });
      expect(h.eventsOf("retry:sleep")).toHaveLength(1);
      await h.expectClean();
    });

    // 108 (e), a Retry-After given as an HTTP-date, is parsed by the HTTP layer into retryAfterMs; it
    // lands with the HTTP issue. The loop's side of it (retryAfterMs replaces the backoff) is 108 (a).
  });

  describe("109: sustained failure stops sending retries (circuit breaker)", () => {
    // HTTP form (client.getJson("/down", { retry: false }) against a fault-server route) lands with the
    // HTTP issue.
    it("109: the breaker opens at 200, fails calls at once while open, and lets one probe through from 1200", async () => {
      const h = createHarness();
      const breaker = createCircuitBreaker({ failureThreshold: 5, halfOpenAfterMs: 1000 });
      const route = createRoute(h, [503, 503, 503, 503, 503, { status: 200, delayMs: 100 }]);
      const errors = new Map<string, unknown>();
      let timersWhileOpen = -1;
      const describeError = (e: unknown) =>
        isRetryExhaustedError(e)
          ? `RetryExhaustedError ${e.reason}`
          : isBrokenCircuitError(e)
            ? "BrokenCircuitError"
            : String(e);
      function* call(name: string): Operation<void> {
        try {
          yield* retry(() => breaker.run(route.request), {
            attempts: 3,
            backoff: B,
            onRetry: (i) => h.mark(`${name} retry ${i.attempt}: ${breaker.state}`),
          });
          h.mark(`${name}: ok`);
        } catch (e) {
          errors.set(name, e);
          h.mark(`${name}: ${describeError(e)}`);
        }
      }

      await h.run(
        function* caller() {
          yield* call("call1");
          yield* call("call2");
          for (const n of [3, 4, 5, 6]) yield* call(`call${n}`);
          h.mark(`state ${breaker.state}`);
          timersWhileOpen = h.clock.pendingTimers;
          yield* sleep(900);
          h.mark(`state ${breaker.state}`);
          const second = yield* spawn(function* secondTask() {
            yield* sleep(50);
            yield* call("call8");
          });
          yield* call("call7");
          h.mark(`state ${breaker.state}`);
          yield* second;
        },
        { random: half },
      );

      expect(h.log).toEqual([
        "call1 retry 1: closed@0",
        "call1 retry 2: closed@50",
        "call1: RetryExhaustedError attempts@150",
        "call2 retry 1: closed@150",
        "call2 retry 2: open@200",
        "call2: BrokenCircuitError@300",
        "call3: BrokenCircuitError@300",
        "call4: BrokenCircuitError@300",
        "call5: BrokenCircuitError@300",
        "call6: BrokenCircuitError@300",
        "state open@300",
        "state half-open@1200",
        "call8: BrokenCircuitError@1250",
        "call7: ok@1300",
        "state closed@1300",
      ]);
      expect(route.arrivals).toEqual([0, 50, 150, 150, 200, 1200]);
      for (const name of ["call2", "call3", "call4", "call5", "call6", "call8"]) {
        expect(errors.get(name), name).toBeInstanceOf(BrokenCircuitError);
        expect(isTransient(errors.get(name)), name).toBe(false);
      }
      expect(timersWhileOpen).toBe(0);
      await h.expectClean();
    });

    it("109: a call cancelled during its request is not a failure; only the next real failure opens the breaker", async () => {
      const h = createHarness();
      const breaker = createCircuitBreaker({ failureThreshold: 5, halfOpenAfterMs: 1000 });
      const route = createRoute(h, [503, 503, 503, 503, { status: 200, delayMs: 1000 }, 503]);

      await h.run(function* caller() {
        for (let i = 0; i < 4; i++) {
          try {
            yield* breaker.run(route.request);
          } catch {
            // Four real failures: one short of the threshold.
          }
        }
        h.mark(`after 4 failures: ${breaker.state}`);
        const inFlight = yield* spawn(() => breaker.run(route.request));
        yield* sleep(10);
        yield* inFlight.cancel();
        h.mark(`after the cancelled call: ${breaker.state}`);
        try {
          yield* breaker.run(route.request);
        } catch (e) {
          h.mark(`next call: HTTP ${(e as HttpLikeError).status}`);
        }
        h.mark(`after the next failure: ${breaker.state}`);
      });

      expect(h.log).toEqual([
        "after 4 failures: closed@0",
        "after the cancelled call: closed@10",
        "next call: HTTP 503@10",
        "after the next failure: open@10",
      ]);
      expect(route.arrivals).toEqual([0, 0, 0, 0, 0, 10]);
      await h.expectClean();
    });
  });

  it("G setup: withRandom pins the jitter like the run option does", async () => {
    const h = createHarness();
    const route = createRoute(h, [503, 503, 200]);

    const r = await outcomeOf(
      h,
      () => withRandom(half, retry(route.request, { attempts: 5, backoff: B })),
      () => 0.999,
    );

    expect(route.arrivals).toEqual([0, 50, 150]);
    expect(r).toEqual({ ok: true, value: { ok: true }, at: 150, timers: 0 });
    await h.expectClean();
  });
});
