/**
 * Conformance, section G over HTTP: the cases of design/conformance.md 100–109 that are written
 * against `client.getJson("/r", { retry: { …, backoff: B } })` on `createHttpClient({ baseUrl:
 * server.url })` and a `createFaultServer` route given as a response sequence. The plain-operation
 * forms, and the cases that have no HTTP form (102, 103, 101 (b, c)), are in g-retries.test.ts.
 *
 * Every case runs on the harness's virtual clock with autojump and the random source pinned to 0.5
 * (`h.run(op, { random })`); request times are the server's `requests[i].arrivedAt`. A hanging route
 * (`{ hang: "before-headers" }`) stands for `hang` in 105–107. "Left: 0 sockets" is read from the
 * server's records once the client's scope has ended and its pool has closed.
 */
import {
  constant,
  createCircuitBreaker,
  exponential,
  isBrokenCircuitError,
  isCancelled,
  isRetryExhaustedError,
  isTimeoutError,
  isTransient,
  type Operation,
  RetryExhaustedError,
  type RetryInfo,
  retry,
  scoped,
  sleep,
  spawn,
  type Task,
  TaskCancelledError,
  TimeoutError,
  timeout,
  timeoutAt,
  until,
} from "@keel/core";
import { createHttpClient, type HttpClient, type HttpClientOptions, HttpError } from "@keel/core/http";
import {
  createFaultServer,
  createHarness,
  type FaultServer,
  type Harness,
  type RouteScript,
} from "@keel/testing";
import { describe, expect, it } from "vitest";
import { rejectionOf } from "../support/errors.js";
import { retryEventCounts } from "../support/events.js";
import { settle } from "../support/http.js";
import { outcome } from "../support/outcome.js";
import { cancelAtWithTimers } from "../support/timing.js";

/** The section's backoff: with random 0.5, delays 50, 100, 200, 400, 500, 500. */
const B = exponential({ baseMs: 100, factor: 2, maxMs: 1000, jitter: "full" });
const half = () => 0.5;
const OK = { status: 200, json: { ok: true } } as const;
const HANG = { hang: "before-headers" } as const;

/** What the server's books say about sockets once the client's pool has closed. */
interface Sockets {
  /** Server-side sockets still open. */
  readonly open: number;
  /** Connections without a `closedAt`. */
  readonly unclosed: number;
}

interface Setup {
  readonly routes: Readonly<Record<string, RouteScript>>;
  /** Which URL of the server the client is based on (default `server.url`). */
  readonly baseUrl?: (server: FaultServer) => string;
  readonly client?: Omit<HttpClientOptions, "baseUrl">;
}

/**
 * Inside the calling task: starts a fault server, runs `body` with a client on it in a scope of its
 * own, and once that scope (so the client's pool) has ended, reads what sockets are left.
 */
function* withClient<T>(
  setup: Setup,
  body: (client: HttpClient, server: FaultServer) => Operation<T>,
): Operation<{ result: T; server: FaultServer; sockets: Sockets }> {
  const server = yield* createFaultServer(setup.routes, { connectHang: false });
  const result = yield* scoped(function* clientScope() {
    const client = yield* createHttpClient({
      ...setup.client,
      baseUrl: (setup.baseUrl ?? ((s) => s.url))(server),
    });
    return yield* body(client, server);
  });
  // The pool is closed; give the server's side the real turns it needs to see the last FIN.
  yield* until(settle(() => server.openSockets === 0));
  const sockets = {
    open: server.openSockets,
    unclosed: server.connections.filter((c) => c.closedAt === null).length,
  };
  return { result, server, sockets };
}

/** Runs one `getJson` case in a root task (random 0.5) and reports its outcome, the server and the sockets left. */
async function runCase<T>(
  h: Harness,
  setup: Setup,
  call: (client: HttpClient, server: FaultServer) => Operation<T>,
) {
  const { result, server, sockets } = await h.run(
    () => withClient(setup, (client, server) => outcome(h, call(client, server))),
    { random: half },
  );
  return { r: result, server, sockets, arrivals: server.requests.map((q) => q.arrivedAt) };
}

/** When the connection each request came on closed, in request order. */
function requestSocketsClosedAt(server: FaultServer): (number | null | undefined)[] {
  return server.requests.map((q) => server.connections.find((c) => c.id === q.connectionId)?.closedAt);
}

const noSocketsLeft: Sockets = { open: 0, unclosed: 0 };

describe("G over HTTP: retries, backoff and the total budget", () => {
  describe("100: only retryable outcomes are retried", () => {
    it("100 (a): a 503 then a 200 is retried once: requests at 0 and 50, the value at 50", async () => {
      const h = createHarness();

      const { r, arrivals, sockets } = await runCase(h, { routes: { "/r": [503, OK] } }, (client) =>
        client.getJson("/r", { retry: { attempts: 5, backoff: B } }),
      );

      expect(r).toEqual({ ok: true, value: { ok: true }, at: 50, timers: 0 });
      expect(arrivals).toEqual([0, 50]);
      expect(sockets).toEqual(noSocketsLeft);
      await h.expectClean();
    });

    it("100 (b): a 404 is thrown unwrapped from getJson at 0 after one request, with no backoff timer armed", async () => {
      const h = createHarness();

      const { r, arrivals, sockets } = await runCase(h, { routes: { "/r": [404] } }, (client) =>
        client.getJson("/r", { retry: { attempts: 5, backoff: B } }),
      );

      expect(r).toMatchObject({ ok: false, at: 0, timers: 0 });
      expect(r.error).toBeInstanceOf(HttpError);
      expect(r.error).not.toBeInstanceOf(RetryExhaustedError);
      expect(r.error).toMatchObject({ status: 404 });
      expect(arrivals).toEqual([0]);
      expect(h.eventsOf("retry:sleep")).toHaveLength(0);
      expect(h.eventsOf("retry:giveup").map((e) => [e.reason, e.error])).toEqual([
        ["not-retryable", r.error],
      ]);
      expect(sockets).toEqual(noSocketsLeft);
      await h.expectClean();
    });

    it("100 (c): 429, 500, 502 and 504 are all retried: requests at 0, 50, 150, 350, 750, the value at 750", async () => {
      const h = createHarness();

      const { r, arrivals, sockets } = await runCase(
        h,
        { routes: { "/r": [429, 500, 502, 504, OK] } },
        (client) => client.getJson("/r", { retry: { attempts: 5, backoff: B } }),
      );

      expect(r).toEqual({ ok: true, value: { ok: true }, at: 750, timers: 0 });
      expect(arrivals).toEqual([0, 50, 150, 350, 750]);
      expect(h.eventsOf("retry:sleep").map((e) => (e.error as HttpError).status)).toEqual([
        429, 500, 502, 504,
      ]);
      expect(sockets).toEqual(noSocketsLeft);
      await h.expectClean();
    });

    it("100 (d): a connection closed without a response is transient for a GET: 2 requests, the value at 50", async () => {
      const h = createHarness();

      const { r, arrivals, sockets } = await runCase(
        h,
        { routes: { "/r": [{ close: "without-response" }, OK] } },
        (client) => client.getJson("/r", { retry: { attempts: 5, backoff: B } }),
      );

      expect(r).toEqual({ ok: true, value: { ok: true }, at: 50, timers: 0 });
      expect(arrivals).toEqual([0, 50]);
      const sleeps = h.eventsOf("retry:sleep");
      expect(sleeps).toHaveLength(1);
      expect(isTransient(sleeps[0]!.error)).toBe(true);
      expect(sleeps[0]!.error).not.toBeInstanceOf(HttpError);
      expect(sockets).toEqual(noSocketsLeft);
      await h.expectClean();
    });

    it("100 (e): a listener that refuses connections runs out of attempts: RetryExhaustedError at 50 caused by ECONNREFUSED", async () => {
      const h = createHarness();

      const { r, arrivals, server } = await runCase(
        h,
        { routes: { "/r": OK }, baseUrl: (s) => s.refusedUrl },
        (client) => client.getJson("/r", { retry: { attempts: 2, backoff: B } }),
      );

      expect(h.eventsOf("retry:attempt").map((e) => [e.attempt, e.at])).toEqual([
        [1, 0],
        [2, 50],
      ]);
      expect(h.eventsOf("http:request").map((e) => e.at)).toEqual([0, 50]);
      expect(r).toMatchObject({ ok: false, at: 50, timers: 0 });
      expect(r.error).toBeInstanceOf(RetryExhaustedError);
      expect(r.error).toMatchObject({ reason: "attempts", attempts: 2 });
      expect((r.error as RetryExhaustedError).cause).toMatchObject({ code: "ECONNREFUSED" });
      expect(arrivals).toEqual([]);
      expect(server.connections).toEqual([]);
      await h.expectClean();
    });

    it("100 (f): a 404 after a retried 503 is thrown itself, unwrapped, at 50 after 2 requests", async () => {
      const h = createHarness();

      const { r, arrivals, sockets } = await runCase(h, { routes: { "/r": [503, 404] } }, (client) =>
        client.getJson("/r", { retry: { attempts: 5, backoff: B } }),
      );

      expect(r).toMatchObject({ ok: false, at: 50, timers: 0 });
      expect(r.error).toBeInstanceOf(HttpError);
      expect(r.error).not.toBeInstanceOf(RetryExhaustedError);
      expect(r.error).toMatchObject({ status: 404 });
      expect(arrivals).toEqual([0, 50]);
      expect(h.eventsOf("retry:attempt").map((e) => [e.attempt, e.at])).toEqual([
        [1, 0],
        [2, 50],
      ]);
      const sleeps = h.eventsOf("retry:sleep");
      expect(sleeps).toHaveLength(1);
      expect(sleeps[0]!.error).toBeInstanceOf(HttpError);
      expect(sleeps[0]!.error).toMatchObject({ status: 503 });
      expect(sockets).toEqual(noSocketsLeft);
      await h.expectClean();
    });
  });

  it("101 (a): three attempts mean requests at 0, 50, 150 and RetryExhaustedError from getJson at 150 with the history", async () => {
    const h = createHarness();

    const { r, arrivals, sockets } = await runCase(h, { routes: { "/r": 503 } }, (client) =>
      client.getJson("/r", { retry: { attempts: 3, backoff: B } }),
    );

    expect(arrivals).toEqual([0, 50, 150]);
    expect(r).toMatchObject({ ok: false, at: 150, timers: 0 });
    const e = r.error as RetryExhaustedError;
    expect(e).toBeInstanceOf(RetryExhaustedError);
    expect(e).toMatchObject({ reason: "attempts", attempts: 3, elapsedMs: 150 });
    expect(e.cause).toBeInstanceOf(HttpError);
    expect(e.cause).toMatchObject({ status: 503 });
    expect(
      e.history.map((a) => [
        a.attempt,
        a.startedAt,
        a.endedAt,
        a.delayMs,
        a.delayReason,
        (a.error as HttpError).status,
      ]),
    ).toEqual([
      [1, 0, 0, 50, "backoff", 503],
      [2, 50, 50, 100, "backoff", 503],
      [3, 150, 150, undefined, undefined, 503],
    ]);
    expect(e.history[2]!.error).toBe(e.cause);
    expect(retryEventCounts(h)).toEqual({ attempt: 3, sleep: 2, giveup: 1, unreachable: 0 });
    expect(h.eventsOf("retry:sleep").map((s) => [s.at, s.delayMs])).toEqual([
      [0, 50],
      [50, 100],
    ]);
    expect(sockets).toEqual(noSocketsLeft);
    await h.expectClean();
  });

  it("104 (Retry-After): a 2000 ms Retry-After sleep cancelled at 20 stops at 20 after one request", async () => {
    const h = createHarness();
    let server: FaultServer | null = null;
    const t = h.run(
      () =>
        withClient({ routes: { "/r": [{ status: 503, retryAfter: 2 }, OK] } }, (client, s) => {
          server = s;
          return client.getJson("/r", { retry: { attempts: 5, backoff: B } });
        }),
      { random: half },
    );

    const cancelled = cancelAtWithTimers(h, t, 20);
    const error = await rejectionOf(t);

    expect(await cancelled).toEqual({ at: 20, timers: 0 });
    const s = server as FaultServer | null;
    expect(s?.requests.map((q) => q.arrivedAt)).toEqual([0]);
    expect(h.eventsOf("retry:sleep").map((e) => [e.at, e.delayMs, e.delayReason])).toEqual([
      [0, 2000, "retry-after"],
    ]);
    expect(t.state).toBe("cancelled");
    expect(error).toBeInstanceOf(TaskCancelledError);
    expect(retryEventCounts(h)).toEqual({ attempt: 1, sleep: 1, giveup: 0, unreachable: 0 });
    expect(s?.openSockets).toBe(0);
    expect(s === null ? null : requestSocketsClosedAt(s)).toEqual([20]);
    await h.expectClean();
  });

  it("105: per-attempt TimeoutErrors on a hanging route are retried, and the enclosing timeout wins at 5000 unseen by the loop", async () => {
    const h = createHarness();
    const retries: RetryInfo[] = [];
    let seenByCaller: unknown;
    let afterCatch = { at: -1, count: -1, state: "" };
    let caught: unknown;
    const t: Task<{ server: FaultServer; sockets: Sockets }> = h.run(
      () =>
        withClient({ routes: { "/r": HANG } }, function* guardedCall(client) {
          try {
            yield* timeout(5000, function* guarded() {
              try {
                return yield* client.getJson("/r", {
                  retry: { attempts: 10, perAttemptMs: 1000, backoff: B, onRetry: (i) => retries.push(i) },
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
        }),
      { random: half },
    );

    const { server: s, sockets } = await t;

    expect(sockets).toEqual(noSocketsLeft);
    expect(s.requests.map((q) => q.arrivedAt)).toEqual([0, 1050, 2150, 3350, 4750]);
    // Each attempt's cancellation destroyed its socket at that instant.
    expect(requestSocketsClosedAt(s)).toEqual([1000, 2050, 3150, 4350, 5000]);
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

      const { r, arrivals, server, sockets } = await runCase(h, { routes: { "/r": HANG } }, (client) =>
        timeout(
          5000,
          client.getJson("/r", {
            retry: {
              attempts: 3,
              perAttemptMs: 10000,
              backoff: B,
              onRetry: () => {
                onRetryCalls++;
              },
            },
          }),
        ),
      );

      expect(r).toMatchObject({ ok: false, at: 5000, timers: 0 });
      expect(r.error).toBeInstanceOf(TimeoutError);
      expect(r.error).toMatchObject({ timeoutMs: 5000, deadline: 5000 });
      expect(arrivals).toEqual([0]);
      expect(requestSocketsClosedAt(server)).toEqual([5000]);
      expect(onRetryCalls).toBe(0);
      const warnings = h.eventsOf("retry:unreachable");
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatchObject({ at: 0, perAttemptMs: 10000, availableMs: 5000, attempts: 3 });
      expect(warnings[0]!.message).toMatch(/10000/);
      expect(warnings[0]!.message).toMatch(/5000/);
      expect(retryEventCounts(h)).toEqual({ attempt: 1, sleep: 0, giveup: 0, unreachable: 1 });
      expect(sockets).toEqual(noSocketsLeft);
      await h.expectClean();
    });

    it("106 (variant): with budgetMs 5000 instead, RetryExhaustedError(budget, 1 attempt) at 5000, caused by the budget's TimeoutError", async () => {
      const h = createHarness();

      const { r, arrivals, server, sockets } = await runCase(h, { routes: { "/r": HANG } }, (client) =>
        client.getJson("/r", { retry: { attempts: 3, budgetMs: 5000, perAttemptMs: 10000, backoff: B } }),
      );

      expect(r).toMatchObject({ ok: false, at: 5000, timers: 0 });
      expect(r.error).toBeInstanceOf(RetryExhaustedError);
      expect(r.error).toMatchObject({ reason: "budget", attempts: 1 });
      const cause = (r.error as RetryExhaustedError).cause;
      expect(isTimeoutError(cause)).toBe(true);
      expect(cause).toMatchObject({ timeoutMs: 5000, deadline: 5000 });
      expect(arrivals).toEqual([0]);
      expect(requestSocketsClosedAt(server)).toEqual([5000]);
      const warnings = h.eventsOf("retry:unreachable");
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatchObject({ at: 0, perAttemptMs: 10000, availableMs: 5000 });
      expect(sockets).toEqual(noSocketsLeft);
      await h.expectClean();
    });
  });

  it("107: each attempt's limit is clamped to the enclosing deadline (attempt 3 sends 800 ms left), and the outer claim wins at 5000", async () => {
    const h = createHarness();
    let onRetryCalls = 0;

    // deadlineHeader sends the attempt's remaining() downstream: the HTTP form of reading it inside attempt 3.
    const { r, server, arrivals, sockets } = await runCase(
      h,
      { routes: { "/r": HANG }, client: { deadlineHeader: "x-deadline-ms" } },
      (client) =>
        timeoutAt(
          5000,
          client.getJson("/r", {
            retry: {
              attempts: 5,
              perAttemptMs: 2000,
              backoff: constant(100),
              onRetry: () => {
                onRetryCalls++;
              },
            },
          }),
        ),
    );

    expect(arrivals).toEqual([0, 2100, 4200]);
    expect(server.requests.map((q) => q.headers["x-deadline-ms"])).toEqual(["2000", "2000", "800"]);
    expect(h.eventsOf("retry:sleep").map((e) => e.at)).toEqual([2000, 4100]);
    expect(requestSocketsClosedAt(server)).toEqual([2000, 4100, 5000]);
    expect(r).toMatchObject({ ok: false, at: 5000, timers: 0 });
    expect(r.error).toBeInstanceOf(TimeoutError);
    expect(r.error).not.toBeInstanceOf(RetryExhaustedError);
    expect(r.error).toMatchObject({ deadline: 5000 });
    expect(onRetryCalls).toBe(2);
    expect(retryEventCounts(h)).toEqual({ attempt: 3, sleep: 2, giveup: 0, unreachable: 0 });
    expect(sockets).toEqual(noSocketsLeft);
    await h.expectClean();
  });

  describe("108: Retry-After is honoured, within the budget", () => {
    it("108 (a): a 429 with Retry-After: 2 gives retryAfterMs 2000, which replaces the computed 50 and is not capped by maxMs", async () => {
      const h = createHarness();
      const retries: RetryInfo[] = [];

      const { r, arrivals, sockets } = await runCase(
        h,
        { routes: { "/r": [{ status: 429, retryAfter: 2 }, OK] } },
        (client) =>
          client.getJson("/r", { retry: { attempts: 5, backoff: B, onRetry: (i) => retries.push(i) } }),
      );

      expect(arrivals).toEqual([0, 2000]);
      expect(r).toEqual({ ok: true, value: { ok: true }, at: 2000, timers: 0 });
      expect(retries.map((i) => [i.delayMs, i.delayReason])).toEqual([[2000, "retry-after"]]);
      expect(retries[0]!.error).toBeInstanceOf(HttpError);
      expect(retries[0]!.error).toMatchObject({ status: 429, retryAfterMs: 2000 });
      expect(sockets).toEqual(noSocketsLeft);
      await h.expectClean();
    });

    it("108 (a, history): the history records the 2000 ms delay as chosen because of Retry-After", async () => {
      const h = createHarness();

      const { r, arrivals, sockets } = await runCase(
        h,
        { routes: { "/r": [{ status: 429, retryAfter: 2 }, 503] } },
        (client) => client.getJson("/r", { retry: { attempts: 2, backoff: B } }),
      );

      expect(arrivals).toEqual([0, 2000]);
      expect(r).toMatchObject({ ok: false, at: 2000, timers: 0 });
      const e = r.error as RetryExhaustedError;
      expect(e).toBeInstanceOf(RetryExhaustedError);
      expect(e.history[0]).toMatchObject({ delayMs: 2000, delayReason: "retry-after" });
      expect(e.history[0]!.error).toMatchObject({ status: 429, retryAfterMs: 2000 });
      expect(sockets).toEqual(noSocketsLeft);
      await h.expectClean();
    });

    it("108 (b): a Retry-After: 10 beyond budgetMs 3000 gives up at 0 with reason budget, starting no sleep", async () => {
      const h = createHarness();

      const { r, arrivals, sockets } = await runCase(
        h,
        { routes: { "/r": [{ status: 503, retryAfter: 10 }, OK] } },
        (client) => client.getJson("/r", { retry: { attempts: 5, budgetMs: 3000, backoff: B } }),
      );

      expect(arrivals).toEqual([0]);
      expect(r).toMatchObject({ ok: false, at: 0, timers: 0 });
      expect(r.error).toBeInstanceOf(RetryExhaustedError);
      expect(r.error).toMatchObject({ reason: "budget", attempts: 1 });
      const cause = (r.error as RetryExhaustedError).cause;
      expect(cause).toBeInstanceOf(HttpError);
      expect(cause).toMatchObject({ status: 503, retryAfterMs: 10000 });
      expect(h.eventsOf("retry:sleep")).toHaveLength(0);
      expect(sockets).toEqual(noSocketsLeft);
      await h.expectClean();
    });

    it("108 (b, enclosing): the same under timeout(3000) gives up at 0 with reason deadline", async () => {
      const h = createHarness();

      const { r, arrivals, sockets } = await runCase(
        h,
        { routes: { "/r": [{ status: 503, retryAfter: 10 }, OK] } },
        (client) => timeout(3000, client.getJson("/r", { retry: { attempts: 5, backoff: B } })),
      );

      expect(arrivals).toEqual([0]);
      expect(r).toMatchObject({ ok: false, at: 0, timers: 0 });
      expect(r.error).toBeInstanceOf(RetryExhaustedError);
      expect(r.error).toMatchObject({ reason: "deadline", attempts: 1 });
      const cause = (r.error as RetryExhaustedError).cause;
      expect(cause).toBeInstanceOf(HttpError);
      expect(cause).toMatchObject({ status: 503, retryAfterMs: 10000 });
      expect(h.eventsOf("retry:sleep")).toHaveLength(0);
      expect(sockets).toEqual(noSocketsLeft);
      await h.expectClean();
    });

    for (const value of ["-1", "soon"]) {
      it(`108 (c): Retry-After: ${value} is ignored (retryAfterMs undefined), the next request at 50 by backoff`, async () => {
        const h = createHarness();

        const { r, arrivals, sockets } = await runCase(
          h,
          { routes: { "/r": [{ status: 503, retryAfter: value }, OK] } },
          (client) => client.getJson("/r", { retry: { attempts: 5, backoff: B } }),
        );

        expect(arrivals).toEqual([0, 50]);
        expect(r).toEqual({ ok: true, value: { ok: true }, at: 50, timers: 0 });
        const sleeps = h.eventsOf("retry:sleep");
        expect(sleeps.map((e) => [e.delayMs, e.delayReason])).toEqual([[50, "backoff"]]);
        expect(sleeps[0]!.error).toBeInstanceOf(HttpError);
        expect((sleeps[0]!.error as HttpError).headers["retry-after"]).toBe(value);
        expect((sleeps[0]!.error as HttpError).retryAfterMs).toBeUndefined();
        expect(sockets).toEqual(noSocketsLeft);
        await h.expectClean();
      });
    }

    it("108 (d): a Retry-After after the last attempt is not slept: RetryExhaustedError(attempts, 2) at 1000", async () => {
      const h = createHarness();

      const { r, arrivals, sockets } = await runCase(
        h,
        {
          routes: {
            "/r": [{ status: 503, retryAfter: 1 }, { status: 503, retryAfter: 1 }, OK],
          },
        },
        (client) => client.getJson("/r", { retry: { attempts: 2, backoff: B } }),
      );

      expect(arrivals).toEqual([0, 1000]);
      expect(r).toMatchObject({ ok: false, at: 1000, timers: 0 });
      expect(r.error).toBeInstanceOf(RetryExhaustedError);
      expect(r.error).toMatchObject({ reason: "attempts", attempts: 2 });
      expect(h.eventsOf("retry:sleep").map((e) => [e.at, e.delayMs])).toEqual([[0, 1000]]);
      expect(sockets).toEqual(noSocketsLeft);
      await h.expectClean();
    });

    it("108 (e): a Retry-After HTTP-date 3 s ahead of the server's clock puts the next request 3000 ms later", async () => {
      const start = Date.UTC(2030, 0, 2, 3, 4, 5);
      const h = createHarness({ start });

      const { r, arrivals, sockets } = await runCase(
        h,
        { routes: { "/r": [{ status: 503, retryAfter: new Date(start + 3000) }, OK] } },
        (client) => client.getJson("/r", { retry: { attempts: 5, backoff: B } }),
      );

      expect(arrivals).toEqual([start, start + 3000]);
      expect(r).toEqual({ ok: true, value: { ok: true }, at: start + 3000, timers: 0 });
      const sleeps = h.eventsOf("retry:sleep");
      expect(sleeps.map((e) => [e.at, e.delayMs, e.delayReason])).toEqual([[start, 3000, "retry-after"]]);
      expect((sleeps[0]!.error as HttpError).headers["retry-after"]).toBe("Wed, 02 Jan 2030 03:04:08 GMT");
      expect(sockets).toEqual(noSocketsLeft);
      await h.expectClean();
    });
  });

  describe("109: sustained failure stops sending retries (circuit breaker)", () => {
    it("109: the breaker opens at 200, fails calls at once while open, and lets one probe through from 1200", async () => {
      const h = createHarness();
      const breaker = createCircuitBreaker({ failureThreshold: 5, halfOpenAfterMs: 1000 });
      const errors = new Map<string, unknown>();
      let timersWhileOpen = -1;
      const describeError = (e: unknown) =>
        isRetryExhaustedError(e)
          ? `RetryExhaustedError ${e.reason}`
          : isBrokenCircuitError(e)
            ? "BrokenCircuitError"
            : String(e);

      const { server, sockets } = await h.run(
        () =>
          withClient(
            { routes: { "/down": [503, 503, 503, 503, 503, { ...OK, delayMs: 100 }] } },
            function* calls(client) {
              function* call(name: string): Operation<void> {
                try {
                  yield* retry(() => breaker.run(() => client.getJson("/down", { retry: false })), {
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
          ),
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
      expect(server.requests.map((q) => q.arrivedAt)).toEqual([0, 50, 150, 150, 200, 1200]);
      expect((errors.get("call1") as RetryExhaustedError).cause).toBeInstanceOf(HttpError);
      for (const name of ["call2", "call3", "call4", "call5", "call6", "call8"]) {
        expect(isBrokenCircuitError(errors.get(name)), name).toBe(true);
        expect(isTransient(errors.get(name)), name).toBe(false);
      }
      expect(timersWhileOpen).toBe(0);
      expect(sockets).toEqual(noSocketsLeft);
      await h.expectClean();
    });

    it("109: a call cancelled during its request is not a failure; only the next real failure opens the breaker", async () => {
      const h = createHarness();
      const breaker = createCircuitBreaker({ failureThreshold: 5, halfOpenAfterMs: 1000 });

      const { server, sockets } = await h.run(() =>
        withClient(
          { routes: { "/down": [503, 503, 503, 503, { ...OK, delayMs: 1000 }, 503] } },
          function* calls(client) {
            const down = () => breaker.run(() => client.getJson("/down", { retry: false }));
            for (let i = 0; i < 4; i++) {
              try {
                yield* down();
              } catch {
                // Four real failures: one short of the threshold.
              }
            }
            h.mark(`after 4 failures: ${breaker.state}`);
            const inFlight = yield* spawn(down);
            yield* sleep(10);
            yield* inFlight.cancel();
            h.mark(`after the cancelled call: ${breaker.state}`);
            try {
              yield* down();
            } catch (e) {
              h.mark(`next call: HTTP ${(e as HttpError).status}`);
            }
            h.mark(`after the next failure: ${breaker.state}`);
          },
        ),
      );

      expect(h.log).toEqual([
        "after 4 failures: closed@0",
        "after the cancelled call: closed@10",
        "next call: HTTP 503@10",
        "after the next failure: open@10",
      ]);
      expect(server.requests.map((q) => q.arrivedAt)).toEqual([0, 0, 0, 0, 0, 10]);
      // The cancelled request's socket was destroyed when it was cancelled.
      expect(requestSocketsClosedAt(server)[4]).toBe(10);
      expect(sockets).toEqual(noSocketsLeft);
      await h.expectClean();
    });
  });
});
