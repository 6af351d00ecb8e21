/**
 * The client's `around` hook wraps every attempt, retries included, and `client.stats()` reads
 * undici's pools. Virtual clock, fault server.
 */
import {
  BrokenCircuitError,
  constant,
  createCircuitBreaker,
  createRateLimiter,
  sleep,
  spawn,
} from "@keel/core";
import { createHttpClient, type HttpAttemptHook, type HttpError } from "@keel/core/http";
import { createFaultServer, createHarness } from "@keel/testing";
import { describe, expect, it } from "vitest";

const quick = { attempts: 5, backoff: constant(10) };

describe("around: a hook per attempt", () => {
  it("wraps every attempt of a call, the client's retries included, with the attempt's number", async () => {
    const h = createHarness();
    const out = await h.run(function* () {
      const server = yield* createFaultServer(
        { "/orders": [503, 503, { json: { id: 7 } }] },
        { connectHang: false },
      );
      const seen: string[] = [];
      const around: HttpAttemptHook = function* (attempt, info) {
        seen.push(`${info.label} #${info.attempt} start`);
        const value = yield* attempt;
        seen.push(`#${info.attempt} ok`);
        return value;
      };
      const client = yield* createHttpClient({ baseUrl: server.url, retry: quick, around });
      const body = yield* client.getJson("/orders");
      return { body, seen };
    });
    expect(out).toEqual({
      body: { id: 7 },
      seen: ["GET /orders #1 start", "GET /orders #2 start", "GET /orders #3 start", "#3 ok"],
    });
    await h.expectClean();
  });

  it("a circuit breaker inside each attempt opens after two 503s: the third attempt is not sent and the call fails with BrokenCircuitError", async () => {
    const h = createHarness();
    const out = await h.run(function* () {
      const server = yield* createFaultServer({ "/pay": 503 }, { connectHang: false });
      const breaker = createCircuitBreaker({ name: "pay", failureThreshold: 2, halfOpenAfterMs: 60_000 });
      const client = yield* createHttpClient({
        baseUrl: server.url,
        retry: quick,
        around: (attempt) => breaker.run(attempt),
      });
      try {
        yield* client.getJson("/pay");
        return null;
      } catch (e) {
        return { broken: e instanceof BrokenCircuitError, hits: server.hits("/pay"), state: breaker.state };
      }
    });
    expect(out).toEqual({ broken: true, hits: 2, state: "open" });
    await h.expectClean();
  });

  it("a rate limiter paces every attempt: 3 calls at 10 a second arrive 100 ms apart", async () => {
    const h = createHarness();
    const arrivals = await h.run(function* () {
      const server = yield* createFaultServer({ "/q": { json: 1 } }, { connectHang: false });
      const limiter = createRateLimiter({ perSecond: 10, burst: 1 });
      const client = yield* createHttpClient({
        baseUrl: server.url,
        around: function* (attempt) {
          yield* limiter.take();
          return yield* attempt;
        },
      });
      for (let i = 0; i < 3; i++) yield* client.getJson("/q");
      return server.requests.map((r) => r.arrivedAt);
    });
    expect(arrivals).toEqual([0, 100, 200]);
    await h.expectClean();
  });

  it("a POST the hook refused before sending is retried (it never reached the server); once sent, its 503 is not", async () => {
    const h = createHarness();
    const out = await h.run(function* () {
      const server = yield* createFaultServer({ "POST /orders": 503 }, { connectHang: false });
      let refusals = 1;
      const client = yield* createHttpClient({
        baseUrl: server.url,
        retry: quick,
        around: function* (attempt) {
          if (refusals-- > 0) throw Object.assign(new Error("auth token refreshing"), { retryable: true });
          return yield* attempt;
        },
      });
      try {
        yield* client.post("/orders", { json: {} });
        return null;
      } catch (e) {
        return { status: (e as HttpError).status, hits: server.hits("POST /orders") };
      }
    });
    expect(out).toEqual({ status: 503, hits: 1 });
    await h.expectClean();
  });
});

describe("client.stats()", () => {
  it("counts connections and requests per origin while requests run, and free connections after", async () => {
    const h = createHarness();
    const out = await h.run(function* () {
      const server = yield* createFaultServer({ "/slow": { json: 1, delayMs: 100 } }, { connectHang: false });
      const client = yield* createHttpClient({ baseUrl: server.url, connections: 2, retry: false });
      const calls = [];
      for (let i = 0; i < 3; i++) calls.push(yield* spawn(() => client.getJson("/slow")));
      yield* sleep(50);
      const during = client.stats();
      for (const c of calls) yield* c;
      const after = client.stats();
      const origin = Object.keys(after.origins);
      return {
        during: { connected: during.connected, running: during.running, size: during.size },
        after: { connected: after.connected, running: after.running, size: after.size },
        someFree: after.free >= 1 && after.free <= after.connected,
        origins: origin.length,
      };
    });
    expect(out).toEqual({
      during: { connected: 2, running: 2, size: 3 },
      after: { connected: 2, running: 0, size: 0 },
      someFree: true,
      origins: 1,
    });
    await h.expectClean();
  });
});
