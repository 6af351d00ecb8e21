/**
 * `createHttpClient` against a real fault server on the harness's virtual clock: the deadline sent
 * downstream, the connection limit under load and under cancellation, argument checks, which
 * failures are retried (and how `Retry-After` sets the delay), and what a request in flight shows
 * in the task tree and the event stream.
 *
 * Socket bookkeeping on both sides: the server's `connections` records and `openSockets`, and the
 * process's TCP handles (client and server sockets), which must come back to what they were.
 */
import {
  all,
  constant,
  formatTaskTree,
  isCancelled,
  isRetryExhaustedError,
  type KeelEvent,
  type Operation,
  RetryExhaustedError,
  scoped,
  sleep,
  snapshot,
  spawn,
  type Task,
  type TaskSnapshot,
  timeoutAt,
  until,
} from "@keel/core";
import { createFaultServer, createHarness, type FaultServer, type Harness } from "@keel/testing";
import { describe, expect, it } from "vitest";
import { settle, socketBookkeeping } from "../../test/support/http.js";
import type { Outcome } from "../../test/support/outcome.js";
import { createHttpClient } from "./client.js";
import { HttpError, isHttpError } from "./errors.js";

// ---------------------------------------------------------------------------------------------
// Bookkeeping helpers.

const watched = ["TCPSocketWrap", "TCPServerWrap", "ConnectWrap", "TCPConnectWrap"];
const { expectAllClosed } = socketBookkeeping(watched);

/** Runs `op` and reports how and when it ended; a cancellation still propagates. */
function* outcome<T>(h: Harness, op: Operation<T>): Operation<Outcome<T>> {
  try {
    const value = yield* op;
    return { ok: true, value, at: h.clock.now(), timers: h.clock.pendingTimers };
  } catch (error) {
    if (isCancelled(error)) throw error;
    return { ok: false, error, at: h.clock.now(), timers: h.clock.pendingTimers };
  }
}

const ok = { ok: true };
/** Backoff for the retry cases: 100 ms between attempts, no jitter. */
const B = constant(100);
/** Max number of connections open at one instant, from the server's records (open at t: openedAt ≤ t < closedAt). */
function maxOverlap(server: FaultServer, end: number): number {
  const instants = new Set(server.connections.flatMap((c) => [c.openedAt, c.closedAt ?? end]));
  let max = 0;
  for (const t of instants) {
    const open = server.connections.filter((c) => c.openedAt <= t && (c.closedAt === null || c.closedAt > t));
    max = Math.max(max, open.length);
  }
  return max;
}

function flatten(s: TaskSnapshot): TaskSnapshot[] {
  return [s, ...s.children.flatMap(flatten)];
}

// ---------------------------------------------------------------------------------------------

describe("createHttpClient: the deadline travels downstream", () => {
  it("three sequential calls under one timeoutAt send what is left of it, less by exactly the virtual time spent", async () => {
    const h = createHarness();
    let server!: FaultServer;
    const r = await h.run(function* melting() {
      server = yield* createFaultServer(
        { "/a": { status: 200, json: ok, delayMs: 120 } },
        { connectHang: false },
      );
      const client = yield* createHttpClient({ baseUrl: server.url, deadlineHeader: "x-deadline-ms" });
      const values = yield* timeoutAt(1000, function* threeCalls() {
        const a = yield* client.getJson("/a");
        // 30 ms of blocking work between the calls is spent too.
        h.clock.advance(30);
        const b = yield* client.getJson("/a");
        const c = yield* client.getJson("/a");
        return [a, b, c];
      });
      const doneAt = h.clock.now();
      // Outside any deadline, the request's own total budget (60 s by default) is what travels.
      yield* client.getJson("/a");
      return { values, doneAt };
    });
    expect(r.values).toEqual([ok, ok, ok]);
    expect(r.doneAt).toBe(390);
    expect(server.requests.map((q) => [q.arrivedAt, q.headers["x-deadline-ms"]])).toEqual([
      [0, "1000"],
      [150, "850"],
      [270, "730"],
      [390, "60000"],
    ]);
    await expectAllClosed(h, server);
  });

  it("sends no deadline header unless the client was configured with one", async () => {
    const h = createHarness();
    let server!: FaultServer;
    await h.run(function* noHeader() {
      server = yield* createFaultServer({ "/a": { status: 200, json: ok } }, { connectHang: false });
      const client = yield* createHttpClient({ baseUrl: server.url });
      yield* timeoutAt(1000, () => client.getJson("/a"));
    });
    expect(Object.keys(server.requests[0]!.headers).filter((k) => k.includes("deadline"))).toEqual([]);
    await expectAllClosed(h, server);
  });
});

describe("createHttpClient: the connection limit", () => {
  const slow = { status: 200, json: ok, delayMs: 100 };

  it("200 concurrent requests through connections: 10 never open more than 10 sockets and all settle at 2000", async () => {
    const h = createHarness();
    let server!: FaultServer;
    const samples: number[] = [];
    const r = await h.run(function* twoHundred() {
      server = yield* createFaultServer({ "/slow": slow }, { connectHang: false });
      const client = yield* createHttpClient({ baseUrl: server.url, connections: 10, retry: false });
      const ticker = yield* spawn(function* ticker() {
        for (;;) {
          samples.push(server.openSockets);
          yield* sleep(10);
        }
      });
      const values = yield* all(Array.from({ length: 200 }, () => client.getJson("/slow")));
      const at = h.clock.now();
      yield* ticker.cancel();
      return { values, at };
    });
    expect(r.values).toHaveLength(200);
    expect(r.values.every((v) => JSON.stringify(v) === JSON.stringify(ok))).toBe(true);
    expect(r.at).toBe(2000);
    expect(samples.length).toBeGreaterThanOrEqual(200);
    expect(Math.max(...samples)).toBe(10);
    expect(maxOverlap(server, 2000)).toBeLessThanOrEqual(10);
    // Ten at a time: ten arrivals at each of 0, 100, …, 1900.
    const waves = new Map<number, number>();
    for (const q of server.requests) waves.set(q.arrivedAt, (waves.get(q.arrivedAt) ?? 0) + 1);
    expect([...waves]).toEqual(Array.from({ length: 20 }, (_, i) => [i * 100, 10]));
    await expectAllClosed(h, server);
  });

  it("cancelling the group of 200 at 250 aborts the 10 in flight and the 170 queued: no request after, sockets back to 0", async () => {
    const h = createHarness();
    let server!: FaultServer;
    let group!: Task<unknown>;
    const samples: number[] = [];
    const r = await h.run(function* cancelledGroup() {
      server = yield* createFaultServer({ "/slow": slow }, { connectHang: false });
      const inside = yield* scoped(function* clientScope() {
        const client = yield* createHttpClient({ baseUrl: server.url, connections: 10, retry: false });
        const ticker = yield* spawn(function* ticker() {
          for (;;) {
            samples.push(server.openSockets);
            yield* sleep(10);
          }
        });
        group = yield* spawn(function* group() {
          return yield* all(Array.from({ length: 200 }, () => client.getJson("/slow")));
        });
        yield* sleep(250);
        yield* group.cancel();
        const cancelledAt = h.clock.now();
        // The pool is back to its baseline (no connection) while the client lives on.
        yield* sleep(100);
        const later = { at: h.clock.now(), open: server.openSockets, requests: server.requests.length };
        yield* ticker.cancel();
        return { cancelledAt, later };
      });
      yield* until(settle(() => server.openSockets === 0));
      return { ...inside, live: h.liveTasks };
    });
    expect(r.cancelledAt).toBe(250);
    expect(group.state).toBe("cancelled");
    expect(server.requests.map((q) => q.arrivedAt).filter((t) => t > 200)).toEqual([]);
    expect(server.requests).toHaveLength(30);
    expect(Math.max(...samples)).toBeLessThanOrEqual(10);
    expect(maxOverlap(server, 350)).toBeLessThanOrEqual(10);
    // The ten sockets in flight were destroyed at 250, not pooled half-read.
    expect(server.connections.filter((c) => c.openedAt === 0).map((c) => c.closedAt)).toEqual(
      Array(10).fill(250),
    );
    expect(r.later).toEqual({ at: 350, open: 0, requests: 30 });
    await expectAllClosed(h, server);
  });
});

describe("createHttpClient: bad input is refused by the call itself, and nothing is sent", () => {
  it("createHttpClient throws TypeError for a bad baseUrl and RangeError for bad connections or timeouts", () => {
    expect(() => createHttpClient({ baseUrl: "not a url" })).toThrow(TypeError);
    expect(() => createHttpClient({ baseUrl: "not a url" })).toThrow(/baseUrl/);
    expect(() => createHttpClient({ baseUrl: "ftp://127.0.0.1/" })).toThrow(TypeError);
    for (const connections of [0, -1, 1.5, Number.NaN]) {
      expect(() => createHttpClient({ connections })).toThrow(RangeError);
      expect(() => createHttpClient({ connections })).toThrow(/connections/);
    }
    for (const [k, v] of [
      ["totalMs", -1],
      ["connectMs", Number.NaN],
      ["headersMs", -5],
      ["bodyIdleMs", Number.NaN],
    ] as const) {
      expect(() => createHttpClient({ timeouts: { [k]: v } })).toThrow(RangeError);
      expect(() => createHttpClient({ timeouts: { [k]: v } })).toThrow(new RegExp(k));
    }
  });

  it("a request throws at the call for an invalid URL, a path without baseUrl, bad timeouts, or body and json together", async () => {
    const h = createHarness();
    let server!: FaultServer;
    const thrown = await h.run(function* badRequests() {
      server = yield* createFaultServer({ "*": { status: 200, json: ok } }, { connectHang: false });
      const client = yield* createHttpClient({ baseUrl: server.url });
      const bare = yield* createHttpClient();
      const calls: Array<[string, () => unknown]> = [
        ["invalid URL", () => client.get("http://[::1")],
        ["not http", () => client.get("ftp://127.0.0.1/x")],
        ["path without baseUrl", () => bare.get("/orders")],
        ["negative totalMs", () => client.get("/x", { timeouts: { totalMs: -1 } })],
        ["NaN connectMs", () => client.get("/x", { timeouts: { connectMs: Number.NaN } })],
        ["NaN headersMs", () => client.getJson("/x", { timeouts: { headersMs: Number.NaN } })],
        ["negative bodyIdleMs", () => client.request("/x", { timeouts: { bodyIdleMs: -1 } })],
        ["body and json", () => client.post("/x", { body: "a=1", json: { a: 1 } })],
      ];
      const seen: Record<string, string> = {};
      for (const [what, call] of calls) {
        try {
          call();
          seen[what] = "no throw";
        } catch (e) {
          seen[what] = `${(e as Error).name}: ${(e as Error).message}`;
        }
      }
      // Let anything that might have been sent arrive.
      yield* sleep(50);
      return seen;
    });
    expect(thrown["invalid URL"]).toMatch(/^TypeError: .*path/);
    expect(thrown["not http"]).toMatch(/^TypeError: .*path/);
    expect(thrown["path without baseUrl"]).toMatch(/^TypeError: .*path.*(absolute|baseUrl)/);
    expect(thrown["negative totalMs"]).toMatch(/^RangeError: .*totalMs/);
    expect(thrown["NaN connectMs"]).toMatch(/^RangeError: .*connectMs/);
    expect(thrown["NaN headersMs"]).toMatch(/^RangeError: .*headersMs/);
    expect(thrown["negative bodyIdleMs"]).toMatch(/^RangeError: .*bodyIdleMs/);
    expect(thrown["body and json"]).toMatch(/^TypeError: .*body.*json/);
    expect(server.requests).toEqual([]);
    expect(server.connections).toEqual([]);
    await expectAllClosed(h, server);
  });
});

describe("createHttpClient: what is retried", () => {
  it("a 4xx other than 408/425/429 fails at once with HttpError: status, headers, a body excerpt capped at 2 KiB; never retried", async () => {
    const h = createHarness();
    let server!: FaultServer;
    const big = "0123456789abcdef".repeat(640); // 10 KiB
    const statuses = [400, 401, 403, 404, 409, 422];
    const r = await h.run(function* fourHundreds() {
      server = yield* createFaultServer(
        Object.fromEntries(
          statuses.map((s) => [`/s${s}`, { status: s, body: big, headers: { "x-reason": `because ${s}` } }]),
        ),
        { connectHang: false },
      );
      const client = yield* createHttpClient({ baseUrl: server.url, retry: { attempts: 5, backoff: B } });
      const got: Outcome<unknown>[] = [];
      for (const s of statuses) got.push(yield* outcome(h, client.getJson(`/s${s}`)));
      return got;
    });
    statuses.forEach((s, i) => {
      const o = r[i]!;
      expect(o).toMatchObject({ ok: false, at: 0, timers: 0 });
      expect(o.error).toBeInstanceOf(HttpError);
      expect(isHttpError(o.error)).toBe(true);
      const e = o.error as HttpError;
      expect(e.status).toBe(s);
      expect(e.retryable).toBe(false);
      expect(e.headers["x-reason"]).toBe(`because ${s}`);
      expect(e.bodyExcerpt).toHaveLength(2048);
      expect(e.bodyExcerpt).toBe(big.slice(0, 2048));
      expect(server.hits(`/s${s}`)).toBe(1);
    });
    expect(h.eventsOf("retry:sleep")).toEqual([]);
    await expectAllClosed(h, server);
  });

  it("a POST answered 503 is not retried without an idempotencyKey: the HttpError itself, 1 request", async () => {
    const h = createHarness();
    let server!: FaultServer;
    const r = await h.run(function* postNoKey() {
      server = yield* createFaultServer(
        { "POST /pay": [503, { status: 200, json: ok }] },
        { connectHang: false },
      );
      const client = yield* createHttpClient({ baseUrl: server.url, retry: { attempts: 3, backoff: B } });
      return yield* outcome(h, client.post("/pay", { json: { amount: 5 } }));
    });
    expect(r).toMatchObject({ ok: false, at: 0, timers: 0 });
    expect(r.error).toBeInstanceOf(HttpError);
    expect(r.error).not.toBeInstanceOf(RetryExhaustedError);
    expect((r.error as HttpError).status).toBe(503);
    expect(server.hits("POST /pay")).toBe(1);
    expect(server.requests[0]!.headers["idempotency-key"]).toBeUndefined();
    await expectAllClosed(h, server);
  });

  it("a POST with an idempotencyKey is retried on 503, with the same Idempotency-Key on every attempt", async () => {
    const h = createHarness();
    let server!: FaultServer;
    const r = await h.run(function* postWithKey() {
      server = yield* createFaultServer(
        { "POST /pay": [503, 503, { status: 201, json: { paid: true } }] },
        { connectHang: false },
      );
      const client = yield* createHttpClient({ baseUrl: server.url, retry: { attempts: 3, backoff: B } });
      const res = yield* client.post("/pay", { json: { amount: 5 }, idempotencyKey: "pay-42" });
      return { status: res.status, body: yield* res.json(), at: h.clock.now() };
    });
    expect(r).toEqual({ status: 201, body: { paid: true }, at: 200 });
    expect(server.requests.map((q) => [q.arrivedAt, q.headers["idempotency-key"], q.body])).toEqual([
      [0, "pay-42", '{"amount":5}'],
      [100, "pay-42", '{"amount":5}'],
      [200, "pay-42", '{"amount":5}'],
    ]);
    await expectAllClosed(h, server);
  });

  it("a POST is retried when the connection was refused (it never reached the server)", async () => {
    const h = createHarness();
    let server!: FaultServer;
    const r = await h.run(function* postRefused() {
      server = yield* createFaultServer({}, { connectHang: false });
      const client = yield* createHttpClient({
        baseUrl: server.refusedUrl,
        retry: { attempts: 3, backoff: B },
      });
      return yield* outcome(h, client.post("/pay", { json: { amount: 5 } }));
    });
    expect(r).toMatchObject({ ok: false, at: 200, timers: 0 });
    expect(isRetryExhaustedError(r.error)).toBe(true);
    expect(r.error).toMatchObject({ reason: "attempts", attempts: 3 });
    expect((r.error as RetryExhaustedError).cause).toMatchObject({ code: "ECONNREFUSED" });
    expect(h.eventsOf("retry:attempt").map((e) => [e.attempt, e.at])).toEqual([
      [1, 0],
      [2, 100],
      [3, 200],
    ]);
    expect(h.eventsOf("http:request").map((e) => [e.method, e.at])).toEqual([
      ["POST", 0],
      ["POST", 100],
      ["POST", 200],
    ]);
    expect(server.requests).toEqual([]);
    await expectAllClosed(h, server);
  });

  it("a POST whose connection closed after it was sent is not retried (it may have reached the server)", async () => {
    const h = createHarness();
    let server!: FaultServer;
    const r = await h.run(function* postReset() {
      server = yield* createFaultServer(
        { "POST /pay": [{ close: "without-response" }, { status: 200, json: ok }] },
        { connectHang: false },
      );
      const client = yield* createHttpClient({ baseUrl: server.url, retry: { attempts: 3, backoff: B } });
      return yield* outcome(h, client.post("/pay", { json: { amount: 5 } }));
    });
    expect(r).toMatchObject({ ok: false, at: 0, timers: 0 });
    expect(isRetryExhaustedError(r.error)).toBe(false);
    expect(server.hits("POST /pay")).toBe(1);
    await expectAllClosed(h, server);
  });

  it("Retry-After in seconds becomes the retry delay: the second request at exactly 2000", async () => {
    const h = createHarness();
    let server!: FaultServer;
    const r = await h.run(function* retryAfterSeconds() {
      server = yield* createFaultServer(
        {
          "/r": [
            { status: 503, retryAfter: 2 },
            { status: 200, json: ok },
          ],
        },
        { connectHang: false },
      );
      const client = yield* createHttpClient({ baseUrl: server.url, retry: { attempts: 3, backoff: B } });
      return yield* outcome(h, client.getJson("/r"));
    });
    expect(r).toMatchObject({ ok: true, value: ok, at: 2000 });
    expect(server.requests.map((q) => q.arrivedAt)).toEqual([0, 2000]);
    const sleeps = h.eventsOf("retry:sleep");
    expect(sleeps.map((e) => [e.delayMs, e.delayReason, e.at])).toEqual([[2000, "retry-after", 0]]);
    expect((sleeps[0]!.error as HttpError).retryAfterMs).toBe(2000);
    await expectAllClosed(h, server);
  });

  it("Retry-After as an HTTP-date becomes the delay to that instant (clock started at a whole second)", async () => {
    const start = 1_700_000_000_000;
    const h = createHarness({ start });
    let server!: FaultServer;
    const r = await h.run(function* retryAfterDate() {
      server = yield* createFaultServer(
        {
          "/r": [
            { status: 503, retryAfter: new Date(start + 3000) },
            { status: 200, json: ok },
          ],
        },
        { connectHang: false },
      );
      const client = yield* createHttpClient({ baseUrl: server.url, retry: { attempts: 3, backoff: B } });
      return yield* outcome(h, client.getJson("/r"));
    });
    expect(r).toMatchObject({ ok: true, value: ok, at: start + 3000 });
    expect(server.requests.map((q) => q.arrivedAt - start)).toEqual([0, 3000]);
    const sleeps = h.eventsOf("retry:sleep");
    expect(sleeps.map((e) => [e.delayMs, e.delayReason])).toEqual([[3000, "retry-after"]]);
    expect((sleeps[0]!.error as HttpError).retryAfterMs).toBe(3000);
    await expectAllClosed(h, server);
  });
});

describe("createHttpClient: a request in the task tree and the event stream", () => {
  it("the task tree shows a request in flight as `GET /slow: waiting for headers`", async () => {
    const h = createHarness();
    let server!: FaultServer;
    let root!: Task<unknown>;
    root = h.run(function* tree() {
      server = yield* createFaultServer(
        { "/slow": { status: 200, json: ok, delayMs: 500 } },
        { connectHang: false },
      );
      const client = yield* createHttpClient({ baseUrl: server.url, retry: false });
      const worker = yield* spawn(function* worker() {
        return yield* client.getJson("/slow");
      });
      yield* sleep(100);
      const snap = snapshot(root);
      const text = formatTaskTree(snap);
      const value = yield* worker;
      return { snap, text, value, workerId: worker.id };
    });
    const r = (await root) as { snap: TaskSnapshot; text: string; value: unknown; workerId: number };
    expect(r.value).toEqual(ok);
    const node = flatten(r.snap).find((s) => s.id === r.workerId);
    expect(node).toMatchObject({
      name: "worker",
      state: "running",
      waitingOn: "GET /slow: waiting for headers",
      waitingForMs: 100,
      waitDetail: { kind: "http", method: "GET", path: "/slow", phase: "headers" },
    });
    expect(r.text).toContain("waiting on GET /slow: waiting for headers");
    await expectAllClosed(h, server);
  });

  it("emits http:request, http:connect, http:headers and http:body in order, at their instants", async () => {
    const h = createHarness();
    let server!: FaultServer;
    const r = await h.run(function* phases() {
      server = yield* createFaultServer(
        { "/phases": { drip: { chunk: "abcde", everyMs: 50, count: 2 }, headersDelayMs: 100 } },
        { connectHang: false },
      );
      const client = yield* createHttpClient({ baseUrl: server.url, retry: false });
      const res = yield* client.get("/phases");
      return yield* res.text();
    });
    expect(r).toBe("abcdeabcde");
    const url = `${server.url}/phases`;
    const http = h.events.filter((e) => e.type.startsWith("http:"));
    expect(http).toMatchObject([
      { type: "http:request", at: 0, method: "GET", url },
      { type: "http:connect", at: 0, method: "GET", url, elapsedMs: 0 },
      { type: "http:headers", at: 100, method: "GET", url, status: 200, elapsedMs: 100 },
      { type: "http:body", at: 200, method: "GET", url, bytes: 10, elapsedMs: 200 },
    ]);
    expect(new Set(http.map((e) => e.path))).toEqual(new Set([`phases#${http[0]!.taskId}`]));
    await expectAllClosed(h, server);
  });

  it("a phase that runs out emits http:timeout; a retried call interleaves retry:* with each attempt's http:*", async () => {
    const h = createHarness();
    let server!: FaultServer;
    await h.run(function* timeoutsAndRetries() {
      server = yield* createFaultServer(
        { "/hang": { hang: "before-headers" }, "/flaky": [503, { status: 200, json: ok }] },
        { connectHang: false },
      );
      const client = yield* createHttpClient({ baseUrl: server.url });
      const hung = yield* outcome(h, client.get("/hang", { timeouts: { headersMs: 300 }, retry: false }));
      h.mark(`hang: ${(hung.error as Error).name} ${(hung.error as { phase?: string }).phase}`);
      yield* client.getJson("/flaky", { retry: { attempts: 2, backoff: B } });
      h.mark("flaky: ok");
    });
    expect(h.log).toEqual(["hang: HttpTimeoutError headers@300", "flaky: ok@400"]);
    const seq = h.events
      .filter((e) => e.type.startsWith("http:") || e.type.startsWith("retry:"))
      .map((e: KeelEvent) => {
        const extra =
          e.type === "http:timeout"
            ? ` ${e.phase} ${e.timeoutMs}`
            : e.type === "http:headers"
              ? ` ${e.status}`
              : e.type === "retry:attempt"
                ? ` ${e.attempt}`
                : e.type === "retry:sleep"
                  ? ` ${e.delayMs}`
                  : "";
        return `${e.type}${extra}@${e.at}`;
      });
    expect(seq).toEqual([
      "http:request@0",
      "http:connect@0",
      "http:timeout headers 300@300",
      "http:error@300",
      "retry:start@300",
      "retry:attempt 1@300",
      "http:request@300",
      "http:connect@300",
      "http:headers 503@300",
      // The 503's (empty) body was read for the error's excerpt.
      "http:body@300",
      // The attempt ends in its HttpError: no response handed over.
      "http:error@300",
      "retry:sleep 100@300",
      "retry:attempt 2@400",
      "http:request@400",
      "http:connect@400",
      "http:headers 200@400",
      "http:body@400",
      "retry:success@400",
      "retry:end@400",
    ]);
    // The phase limit reports what its timeout scope would (semantics §9), owned by that phase.
    const fired = h.eventsOf("timeout:fire");
    expect(fired.map((e) => `${e.scope.label} ${e.timeoutMs} ${e.deadline}@${e.at}`)).toEqual([
      expect.stringMatching(/^GET .*\/hang headers 300 300@300$/),
    ]);
    const requests = h.eventsOf("cancel:request").filter((e) => e.reason.kind === "timeout");
    expect(requests.map((e) => [e.owner, e.at])).toEqual([[fired[0]!.scope, 300]]);
    await expectAllClosed(h, server);
  });
});
