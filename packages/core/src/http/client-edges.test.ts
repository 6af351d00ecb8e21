import { retry, scoped, timeout } from "@keel/core";
import { createHttpClient, type HttpError, HttpTimeoutError } from "@keel/core/http";
import { createFaultServer, createHarness } from "@keel/testing";
import { describe, expect, it } from "vitest";
import { outcome } from "../../test/support/outcome.js";

describe("HTTP client edges", () => {
  it("a deadline spent by blocking work opens no socket: the caller's TimeoutError comes first", async () => {
    const h = createHarness();
    const out = await h.run(function* () {
      const server = yield* createFaultServer({ "/x": { json: 1 } }, { connectHang: false });
      const client = yield* createHttpClient({ baseUrl: server.url, retry: false });
      try {
        yield* timeout(50, function* () {
          h.clock.advance(60);
          return yield* client.getJson("/x");
        });
      } catch (e) {
        return { name: (e as Error).name, hits: server.hits("/x"), connections: server.connections.length };
      }
      return null;
    });
    expect(out).toEqual({ name: "TimeoutError", hits: 0, connections: 0 });
    await h.expectClean();
  });

  it("a POST answered 503 fails with an HttpError that says it is not retryable, so no outer retry resends it", async () => {
    const h = createHarness();
    const out = await h.run(function* () {
      const server = yield* createFaultServer({ "POST /orders": 503 }, { connectHang: false });
      const client = yield* createHttpClient({ baseUrl: server.url });
      try {
        yield* retry(() => client.post("/orders", { json: { id: 1 } }), { attempts: 3 });
      } catch (e) {
        return {
          status: (e as HttpError).status,
          retryable: (e as HttpError).retryable,
          hits: server.hits("/orders"),
        };
      }
      return null;
    });
    expect(out).toEqual({ status: 503, retryable: false, hits: 1 });
    await h.expectClean();
  });

  it("getJson of a 204 returns undefined, and request headers replace client headers case-insensitively", async () => {
    const h = createHarness();
    const out = await h.run(function* () {
      const server = yield* createFaultServer({ "/empty": 204 }, { connectHang: false });
      const client = yield* createHttpClient({ baseUrl: server.url, headers: { "X-Tenant": "a" } });
      const v = yield* client.getJson("/empty", { headers: { "x-tenant": "b" } });
      return { v, tenant: server.requests[0]!.headers["x-tenant"] };
    });
    expect(out).toEqual({ v: undefined, tenant: "b" });
    await h.expectClean();
  });

  it("a client used after its scope ended fails at once with KEEL_CLIENT_CLOSED", async () => {
    const h = createHarness();
    const code = await h.run(function* () {
      const server = yield* createFaultServer({ "/x": { json: 1 } }, { connectHang: false });
      const client = yield* scoped(() => createHttpClient({ baseUrl: server.url }));
      try {
        yield* client.getJson("/x");
      } catch (e) {
        return (e as { code?: string }).code;
      }
      return null;
    });
    expect(code).toBe("KEEL_CLIENT_CLOSED");
    await h.expectClean();
  });

  it("without retry, a phase limit due at the total's instant loses to the total; every timer is gone after", async () => {
    const h = createHarness();
    const r = await h.run(function* () {
      const server = yield* createFaultServer(
        { "/hang": { hang: "before-headers" } },
        { connectHang: false },
      );
      const client = yield* createHttpClient({ baseUrl: server.url, retry: false });
      return yield* outcome(h, client.getJson("/hang", { timeouts: { headersMs: 100, totalMs: 100 } }));
    });
    expect(r).toMatchObject({ ok: false, at: 100, timers: 0 });
    expect(r.error).toBeInstanceOf(HttpTimeoutError);
    expect(r.error).toMatchObject({ phase: "total", code: "KEEL_HTTP_TOTAL_TIMEOUT", timeoutMs: 100 });
    await h.expectClean();
  });

  it("a phase limit later than the one armed before it still fires at its own instant", async () => {
    const h = createHarness();
    const r = await h.run(function* () {
      const server = yield* createFaultServer(
        { "/hang": { hang: "before-headers" } },
        { connectHang: false },
      );
      const client = yield* createHttpClient({ baseUrl: server.url, retry: false });
      // The connect limit (50) is armed first and passes while the request waits for headers.
      const timeouts = { connectMs: 50, headersMs: 300, totalMs: 1000 };
      return yield* outcome(h, client.getJson("/hang", { timeouts }));
    });
    expect(r).toMatchObject({ ok: false, at: 300, timers: 0 });
    expect(r.error).toMatchObject({ phase: "headers", timeoutMs: 300, deadline: 300, elapsedMs: 300 });
    await h.expectClean();
  });
});
