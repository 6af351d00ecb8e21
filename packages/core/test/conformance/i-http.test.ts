/**
 * Conformance, section I: releasing resources under cancellation (cases 116–120 of
 * design/conformance.md), plus the HTTP variant of case 121. Every case runs a real
 * `createFaultServer` and a real `createHttpClient` on the harness's virtual clock: the server and
 * the client hold the clock while bytes are in flight, so every instant below is exact.
 *
 * Setup, unless a case says otherwise: the server and a client with `retry: false` are resources of
 * the test's task. Socket bookkeeping is checked on both sides: the server's `connections` records
 * (when each socket opened and closed, server side) and `openSockets`, and the process's TCP handles
 * (client and server sockets together), which must come back to what they were before the test.
 */
import {
  isCancelled,
  isTaskCancelledError,
  type KeelEvent,
  scoped,
  sleep,
  spawn,
  suspend,
  type Task,
  TaskCancelledError,
  TimeoutError,
  timeout,
  until,
  useAbortSignal,
} from "@keel/core";
import { BodyReleasedError, createHttpClient, type HttpResponse, HttpTimeoutError } from "@keel/core/http";
import {
  type Behaviour,
  createFaultServer,
  createHarness,
  type FaultServer,
  type Harness,
} from "@keel/testing";
import { describe, expect, it } from "vitest";
import { settle, socketBookkeeping } from "../support/http.js";
import { type Outcome, outcome } from "../support/outcome.js";

// ---------------------------------------------------------------------------------------------
// Routes of the section.

/** Headers at 100, 10 body bytes at 300 (of the 100 announced), then nothing. */
const stall: Behaviour = {
  drip: { chunk: 10, everyMs: 200, count: 1 },
  headersDelayMs: 100,
  headers: { "content-length": 100 },
};
/** 10 bytes every 50 ms for 1000 ms: chunks at 50, 100, …, 1000. */
const drip: Behaviour = { drip: { chunk: "dddddddddd", everyMs: 50, count: 20 } };
const orders = { orders: [{ id: 1 }, { id: 2 }] };

// ---------------------------------------------------------------------------------------------
// Socket bookkeeping: TCP handles of this process (client and server sides together).

const watched = [
  "TCPSocketWrap",
  "TCPServerWrap",
  "ConnectWrap",
  "TCPConnectWrap",
  "ProcessWrap",
  "PipeWrap",
];
const { handles, expectAllClosed } = socketBookkeeping(watched);
const tcpSockets = () => handles().TCPSocketWrap ?? 0;

const arrivals = (server: FaultServer) => server.requests.map((r) => `${r.method} ${r.path}@${r.arrivedAt}`);
const lifetimes = (server: FaultServer) => server.connections.map((c) => [c.openedAt, c.closedAt]);
const httpEvents = (h: Harness) =>
  h.events
    .filter((e): e is Extract<KeelEvent, { type: `http:${string}` }> => e.type.startsWith("http:"))
    .map((e) => `${e.type}${"phase" in e ? ` ${e.phase}` : ""}@${e.at}`);

// ---------------------------------------------------------------------------------------------

describe("I. releasing resources under cancellation", () => {
  describe("116: one timeout covers connect, headers, body and parse", () => {
    it("timeout(1000) around getJson fires at 1000 although the headers came at 100, and destroys the socket", async () => {
      const h = createHarness();
      let server!: FaultServer;
      const r = await h.run(function* case116() {
        server = yield* createFaultServer({ "/stall": stall }, { connectHang: false });
        // The default retry, and every phase limit above 1000.
        const client = yield* createHttpClient({ baseUrl: server.url });
        return yield* outcome(
          h,
          timeout(1000, () => client.getJson("/stall")),
        );
      });
      expect(r.ok).toBe(false);
      expect(r.at).toBe(1000);
      expect(r.error).toBeInstanceOf(TimeoutError);
      expect(r.error).not.toBeInstanceOf(HttpTimeoutError);
      expect(r.error).toMatchObject({ timeoutMs: 1000, deadline: 1000, elapsedMs: 1000 });
      expect(arrivals(server)).toEqual(["GET /stall@0"]);
      expect(h.eventsOf("retry:attempt")).toHaveLength(1);
      expect(h.eventsOf("retry:sleep")).toEqual([]);
      // The attempt ends at 1000 without a response (cancelled by the timeout): http:error.
      expect(httpEvents(h)).toEqual([
        "http:request@0",
        "http:connect@0",
        "http:headers@100",
        "http:error@1000",
      ]);
      expect(h.eventsOf("timeout:fire").map((e) => [e.timeoutMs, e.at])).toEqual([[1000, 1000]]);
      expect(lifetimes(server)).toEqual([[0, 1000]]);
      await expectAllClosed(h, server);
    });

    it("(b) a body of invalid JSON completed at 150 throws SyntaxError at 150 through the timeout, not retried", async () => {
      const h = createHarness();
      let server!: FaultServer;
      const r = await h.run(function* case116b() {
        server = yield* createFaultServer(
          { "/bad": { status: 200, body: '{"orders": [1, 2', delayMs: 150 } },
          { connectHang: false },
        );
        const client = yield* createHttpClient({ baseUrl: server.url });
        return yield* outcome(
          h,
          timeout(1000, () => client.getJson("/bad")),
        );
      });
      expect(r.ok).toBe(false);
      expect(r.at).toBe(150);
      expect(r.error).toBeInstanceOf(SyntaxError);
      // The timeout's timer (and every phase timer of the request) is disarmed at 150.
      expect(r.timers).toBe(0);
      expect(arrivals(server)).toEqual(["GET /bad@0"]);
      expect(h.eventsOf("retry:attempt")).toHaveLength(1);
      expect(h.eventsOf("timeout:fire")).toEqual([]);
      await expectAllClosed(h, server);
    });

    it("(c) with timeouts.totalMs 1000 and no outer timeout, getJson throws HttpTimeoutError{phase: total} at 1000", async () => {
      const h = createHarness();
      let server!: FaultServer;
      const r = await h.run(function* case116c() {
        server = yield* createFaultServer({ "/stall": stall }, { connectHang: false });
        const client = yield* createHttpClient({ baseUrl: server.url, retry: false });
        return yield* outcome(h, client.getJson("/stall", { timeouts: { totalMs: 1000 } }));
      });
      expect(r.ok).toBe(false);
      expect(r.at).toBe(1000);
      expect(r.error).toBeInstanceOf(HttpTimeoutError);
      expect(r.error).toMatchObject({ phase: "total", timeoutMs: 1000, code: "KEEL_HTTP_TOTAL_TIMEOUT" });
      expect(arrivals(server)).toEqual(["GET /stall@0"]);
      expect(httpEvents(h)).toEqual([
        "http:request@0",
        "http:connect@0",
        "http:headers@100",
        "http:timeout total@1000",
        "http:error@1000",
      ]);
      expect(h.eventsOf("timeout:fire").map((e) => `${e.scope.label} ${e.timeoutMs}@${e.at}`)).toEqual([
        expect.stringMatching(/ total 1000@1000$/),
      ]);
      expect(lifetimes(server)).toEqual([[0, 1000]]);
      await expectAllClosed(h, server);
    });

    it("(d) with timeouts.bodyIdleMs 200, getJson throws HttpTimeoutError{phase: body} at 500, 200 ms after the last byte", async () => {
      const h = createHarness();
      let server!: FaultServer;
      const r = await h.run(function* case116d() {
        server = yield* createFaultServer({ "/stall": stall }, { connectHang: false });
        const client = yield* createHttpClient({ baseUrl: server.url, retry: false });
        return yield* outcome(h, client.getJson("/stall", { timeouts: { totalMs: 1000, bodyIdleMs: 200 } }));
      });
      expect(r.ok).toBe(false);
      expect(r.at).toBe(500);
      expect(r.error).toBeInstanceOf(HttpTimeoutError);
      expect(r.error).toMatchObject({ phase: "body", timeoutMs: 200, code: "KEEL_HTTP_BODY_TIMEOUT" });
      expect(arrivals(server)).toEqual(["GET /stall@0"]);
      expect(lifetimes(server)).toEqual([[0, 500]]);
      await expectAllClosed(h, server);
    });
  });

  describe("117: a response used after its scope has ended", () => {
    it("(a) an abort signal taken in a scoped block is aborted as soon as the block returns normally", async () => {
      const h = createHarness();
      const seen = await h.run(function* case117a() {
        const s = yield* scoped(function* block() {
          const signal = yield* useAbortSignal();
          h.mark(`inside aborted=${signal.aborted}`);
          return signal;
        });
        h.mark(`after aborted=${s.aborted}`);
        return s.aborted;
      });
      expect(seen).toBe(true);
      expect(h.log).toEqual(["inside aborted=false@0", "after aborted=true@0"]);
      await h.expectClean();
    });

    it("(b) a body read after the block that called request has exited throws KEEL_BODY_RELEASED at once; no second request", async () => {
      const h = createHarness();
      let server!: FaultServer;
      const r = await h.run(function* case117b() {
        server = yield* createFaultServer(
          { "/orders": { status: 200, json: orders, delayMs: 20 } },
          { connectHang: false },
        );
        const client = yield* createHttpClient({ baseUrl: server.url, retry: false });
        const res = yield* scoped(function* block() {
          return yield* client.request("/orders");
        });
        const exitedAt = h.clock.now();
        const read = yield* outcome(h, res.json());
        // Nothing is sent later either.
        yield* sleep(100);
        return {
          exitedAt,
          status: res.status,
          read,
          hits: server.hits("/orders"),
          lifetimes: lifetimes(server),
        };
      });
      expect(r.exitedAt).toBe(20);
      expect(r.status).toBe(200);
      expect(r.read.ok).toBe(false);
      expect(r.read.at).toBe(20);
      expect(r.read.error).toBeInstanceOf(BodyReleasedError);
      expect(r.read.error).toBeInstanceOf(Error);
      expect(r.read.error).toMatchObject({ code: "KEEL_BODY_RELEASED" });
      expect((r.read.error as Error).message).toContain("GET /orders");
      expect(r.hits).toBe(1);
      // The unread body was discarded and its socket destroyed when the block exited.
      expect(r.lifetimes).toEqual([[0, 20]]);
      await expectAllClosed(h, server);
    });

    it("(c) getJson, and request with res.json() in the same scope, give the value and pool the socket until the client's scope exits", async () => {
      const h = createHarness();
      let server!: FaultServer;
      const r = await h.run(function* case117c() {
        server = yield* createFaultServer(
          { "/orders": { status: 200, json: orders, delayMs: 20 } },
          { connectHang: false },
        );
        const inside = yield* scoped(function* clientScope() {
          const client = yield* createHttpClient({ baseUrl: server.url, retry: false });
          const a = yield* client.getJson("/orders");
          const afterA = { at: h.clock.now(), lifetimes: lifetimes(server) };
          const res = yield* client.request("/orders");
          const b = yield* res.json();
          yield* sleep(10);
          // Both bodies were read to the end: no socket was destroyed, each went back to the pool.
          const afterB = { at: h.clock.now(), open: server.openSockets, lifetimes: lifetimes(server) };
          return { a, afterA, b, afterB };
        });
        const exitedAt = h.clock.now();
        yield* until(settle(() => server.openSockets === 0));
        return { ...inside, exitedAt, lifetimes: lifetimes(server), requests: [...server.requests] };
      });
      expect(r.a).toEqual(orders);
      expect(r.b).toEqual(orders);
      expect(r.afterA).toEqual({ at: 20, lifetimes: [[0, null]] });
      expect(r.requests.map((q) => [q.path, q.arrivedAt])).toEqual([
        ["/orders", 0],
        ["/orders", 20],
      ]);
      expect(r.afterB.at).toBe(50);
      expect(r.afterB.lifetimes.every(([, closedAt]) => closedAt === null)).toBe(true);
      expect(r.afterB.open).toBe(r.afterB.lifetimes.length);
      // The pool closes with the client's scope, at 50.
      expect(r.exitedAt).toBe(50);
      expect(r.lifetimes.map(([, closedAt]) => closedAt)).toEqual(r.afterB.lifetimes.map(() => 50));
      await expectAllClosed(h, server);
    });

    it("(b, in flight) a body still arriving when the block exits is discarded and its socket destroyed then", async () => {
      const h = createHarness();
      let server!: FaultServer;
      const r = await h.run(function* case117bInFlight() {
        server = yield* createFaultServer({ "/drip": drip }, { connectHang: false });
        const client = yield* createHttpClient({ baseUrl: server.url, retry: false });
        const res = yield* scoped(function* block() {
          const res = yield* client.request("/drip");
          yield* sleep(75);
          return res;
        });
        const exitedAt = h.clock.now();
        const read = yield* outcome(h, res.text());
        yield* sleep(100);
        return { exitedAt, read, hits: server.hits("/drip"), lifetimes: lifetimes(server) };
      });
      expect(r.exitedAt).toBe(75);
      expect(r.read).toMatchObject({ ok: false, at: 75 });
      expect(r.read.error).toBeInstanceOf(BodyReleasedError);
      expect((r.read.error as Error).message).toContain("GET /drip");
      expect(r.hits).toBe(1);
      expect(r.lifetimes).toEqual([[0, 75]]);
      await expectAllClosed(h, server);
    });
  });

  it("118: a connection cancelled mid-body is destroyed at 150, not pooled; the next request gets a new connection and only its own bytes", async () => {
    const h = createHarness();
    let server!: FaultServer;
    let A!: Task<void>;
    const r = await h.run(function* case118() {
      server = yield* createFaultServer(
        { "/drip": drip, "/orders": { status: 200, json: orders } },
        { connectHang: false },
      );
      const client = yield* createHttpClient({
        baseUrl: server.url,
        connections: 1,
        keepAlive: true,
        retry: false,
      });
      let thirdChunk!: () => void;
      const gotThree = new Promise<void>((resolve) => {
        thirdChunk = resolve;
      });
      A = yield* spawn(function* A() {
        const res = yield* client.request("/drip");
        const reader = res.chunks();
        let n = 0;
        for (let c = yield* reader.next(); !c.done; c = yield* reader.next()) {
          n++;
          h.mark(`A chunk ${n} ${Buffer.from(c.value).toString()}`);
          if (n === 3) thirdChunk();
        }
        h.mark("A read to the end");
      });
      const B = yield* spawn(function* B() {
        yield* sleep(200);
        h.mark("B starts");
        const value = yield* client.getJson("/orders");
        h.mark("B done");
        return value;
      });
      yield* until(gotThree);
      h.mark("cancel A");
      yield* A.cancel();
      h.mark("A cancelled");
      const bValue = yield* B;
      let joinA: unknown = null;
      try {
        yield* A;
      } catch (e) {
        joinA = e;
      }
      return { bValue, joinA, requests: [...server.requests], lifetimesAtB: lifetimes(server) };
    });
    expect(h.log).toEqual([
      "A chunk 1 dddddddddd@50",
      "A chunk 2 dddddddddd@100",
      "A chunk 3 dddddddddd@150",
      "cancel A@150",
      "A cancelled@150",
      "B starts@200",
      "B done@200",
    ]);
    expect(A.state).toBe("cancelled");
    expect(r.joinA).toBeInstanceOf(TaskCancelledError);
    expect(isTaskCancelledError(r.joinA)).toBe(true);
    // Exactly the /orders JSON: no drip byte left over on the connection.
    expect(r.bValue).toEqual(orders);
    // A's socket is destroyed at 150; B gets a second connection at 200; never two open at once.
    expect(r.requests.map((q) => [q.path, q.arrivedAt, q.connectionId])).toEqual([
      ["/drip", 0, 1],
      ["/orders", 200, 2],
    ]);
    expect(r.lifetimesAtB).toEqual([
      [0, 150],
      [200, null],
    ]);
    await expectAllClosed(h, server);
    expect(lifetimes(server)).toEqual([
      [0, 150],
      [200, 200],
    ]);
  });

  describe("119: a cancellation during connect leaks no pool slot", () => {
    /** The case on the connect-hang listener; `connectMs` replaces A's cancel at 50 in the variant. */
    async function case119(variant: "cancel" | "connectMs") {
      const h = createHarness();
      let server!: FaultServer;
      let A!: Task<Outcome<unknown>>;
      const r = await h.run(function* case119() {
        server = yield* createFaultServer({ "/x": { status: 200, json: { x: 1 } } });
        const atStart = tcpSockets();
        const client = yield* createHttpClient({
          baseUrl: server.connectHangUrl,
          connections: 1,
          retry: false,
        });
        // A reports its own failure instead of failing the test's task (a cancellation propagates).
        A = yield* spawn(function* A() {
          try {
            const value = yield* client.getJson(
              "/x",
              variant === "connectMs" ? { timeouts: { connectMs: 30 } } : {},
            );
            h.mark("A value");
            return { ok: true, value, at: h.clock.now(), timers: h.clock.pendingTimers };
          } catch (error) {
            if (isCancelled(error)) throw error;
            h.mark(`A threw ${(error as Error).name}`);
            return { ok: false, error, at: h.clock.now(), timers: h.clock.pendingTimers };
          }
        });
        const B = yield* spawn(function* B() {
          yield* sleep(100);
          const value = yield* client.getJson("/x");
          h.mark("B value");
          return value;
        });
        yield* sleep(50);
        if (variant === "cancel") {
          yield* A.cancel();
          h.mark("A cancelled");
        }
        yield* sleep(10);
        // A's connecting socket is gone on the client side (the server has accepted nothing).
        const clientSocketsAt60 = tcpSockets() - atStart - server.openSockets;
        yield* sleep(20);
        h.mark("release");
        server.releaseConnectHang();
        const bValue = yield* B;
        const joinA = yield* outcome(h, A);
        return {
          clientSocketsAt60,
          bValue,
          joinA,
          requests: [...server.requests],
          lifetimes: lifetimes(server),
        };
      });
      return { h, server, A, r };
    }

    it("A cancelled at 50 while connecting never reaches the server; B gets its value at 100 through the single slot", async () => {
      const { h, server, A, r } = await case119("cancel");
      expect(h.log).toEqual(["A cancelled@50", "release@80", "B value@100"]);
      expect(A.state).toBe("cancelled");
      expect(r.joinA.error).toBeInstanceOf(TaskCancelledError);
      expect(r.clientSocketsAt60).toBe(0);
      expect(r.bValue).toEqual({ x: 1 });
      // The server accepted exactly one client connection, B's, opened at 100.
      expect(r.requests.map((q) => [q.path, q.arrivedAt, q.connectionId])).toEqual([["/x", 100, 1]]);
      expect(r.lifetimes).toEqual([[100, null]]);
      await expectAllClosed(h, server);
    }, 20_000);

    it("(variant) connectMs 30: A's getJson throws HttpTimeoutError{phase: connect} at 30, with the same bookkeeping", async () => {
      const { h, server, A, r } = await case119("connectMs");
      expect(h.log).toEqual(["A threw HttpTimeoutError@30", "release@80", "B value@100"]);
      expect(A.state).toBe("completed");
      const a = r.joinA.value as Outcome<unknown>;
      expect(a.at).toBe(30);
      expect(a.error).toBeInstanceOf(HttpTimeoutError);
      expect(a.error).toMatchObject({ phase: "connect", timeoutMs: 30, code: "KEEL_HTTP_CONNECT_TIMEOUT" });
      expect(h.eventsOf("http:timeout").map((e) => [e.phase, e.at])).toEqual([["connect", 30]]);
      expect(r.clientSocketsAt60).toBe(0);
      expect(r.bValue).toEqual({ x: 1 });
      expect(r.requests.map((q) => [q.path, q.arrivedAt, q.connectionId])).toEqual([["/x", 100, 1]]);
      expect(r.lifetimes).toEqual([[100, null]]);
      await expectAllClosed(h, server);
    }, 20_000);
  });

  it("120: a drain cut by the cleanup budget at 150 still destroys the socket and closes the pool; late reads fail at once", async () => {
    const h = createHarness();
    let server!: FaultServer;
    let T!: Task<void>;
    let leaked: HttpResponse | null = null;
    const r = await h.run(function* case120() {
      server = yield* createFaultServer({ "/drip": drip }, { connectHang: false });
      const atStart = tcpSockets();
      const url = server.url;
      T = h.run(
        function* T() {
          const client = yield* createHttpClient({ baseUrl: url, keepAlive: true, retry: false });
          const res = yield* client.request("/drip");
          leaked = res;
          try {
            yield* suspend();
          } finally {
            // Drain the body so the connection could be reused: 1000 ms of drip, cut at 150.
            yield* res.text();
          }
        },
        { cleanupBudgetMs: 50 },
      );
      yield* sleep(100);
      yield* T.cancel();
      const settledAt = h.clock.now();
      const stateThen = T.state;
      // The pool's teardown could not suspend, yet it completed: no socket on either side.
      yield* until(settle(() => server.openSockets === 0 && tcpSockets() === atStart));
      const books = { at: h.clock.now(), server: server.openSockets, client: tcpSockets() - atStart };
      const late = yield* outcome(h, leaked!.text());
      const eventsBefore = h.events.filter((e) => e.taskId === T.id).length;
      yield* T.cancel();
      return {
        settledAt,
        stateThen,
        books,
        late,
        secondAt: h.clock.now(),
        newEvents: h.events.filter((e) => e.taskId === T.id).length - eventsBefore,
        lifetimes: lifetimes(server),
      };
    });
    expect(r.settledAt).toBe(150);
    expect(r.stateThen).toBe("cancelled");
    const overruns = h.eventsOf("cleanup:overrun");
    expect(overruns).toHaveLength(1);
    expect(overruns[0]).toMatchObject({ at: 150, path: T.path, budgetMs: 50 });
    expect(overruns[0]!.waitingOn).toContain("GET /drip: reading body");
    // The half-read socket is destroyed at 150, not pooled.
    expect(r.lifetimes).toEqual([[0, 150]]);
    expect(r.books).toEqual({ at: 150, server: 0, client: 0 });
    // A leaked reference reads at once the error of 117.
    expect(r.late.ok).toBe(false);
    expect(r.late.at).toBe(150);
    expect(r.late.error).toBeInstanceOf(BodyReleasedError);
    expect(r.late.error).toMatchObject({ code: "KEEL_BODY_RELEASED" });
    expect((r.late.error as Error).message).toContain("GET /drip");
    // The second cancel is a settled future that changes nothing.
    expect(r.secondAt).toBe(150);
    expect(r.newEvents).toBe(0);
    expect(T.state).toBe("cancelled");
    await expect(T).rejects.toBeInstanceOf(TaskCancelledError);
    expect(server.hits("/drip")).toBe(1);
    await expectAllClosed(h, server);
  });
});

describe("J. races at the edges (HTTP)", () => {
  it("121: getJson answered at 99 under timeout(100) wins at 99; the timer is disarmed and the socket pooled", async () => {
    const h = createHarness();
    let server!: FaultServer;
    let task!: Task<unknown>;
    task = h.run(function* case121() {
      server = yield* createFaultServer(
        { "/orders": { status: 200, json: orders, delayMs: 99 } },
        { connectHang: false },
      );
      const r = yield* scoped(function* clientScope() {
        const client = yield* createHttpClient({ baseUrl: server.url, retry: false });
        const got = yield* outcome(
          h,
          timeout(100, () => client.getJson("/orders")),
        );
        const count = task.cancellationCount;
        // Nothing happens at 100.
        yield* sleep(50);
        return { got, count, later: { open: server.openSockets, lifetimes: lifetimes(server) } };
      });
      yield* until(settle(() => server.openSockets === 0));
      return { ...r, afterClient: lifetimes(server) };
    });
    const r = (await task) as {
      got: Outcome<unknown>;
      count: number;
      later: { open: number; lifetimes: unknown };
      afterClient: unknown;
    };
    expect(r.got).toEqual({ ok: true, value: orders, at: 99, timers: 0 });
    expect(r.count).toBe(0);
    expect(h.eventsOf("timeout:fire")).toEqual([]);
    expect(h.eventsOf("http:timeout")).toEqual([]);
    // The only cancellations are the teardowns of the client's and the test's scopes, at 149.
    expect(h.eventsOf("cancel:request").filter((e) => e.at < 149)).toEqual([]);
    // Back in the pool: still open, idle, at 149.
    expect(r.later).toEqual({ open: 1, lifetimes: [[0, null]] });
    expect(r.afterClient).toEqual([[0, 149]]);
    await expectAllClosed(h, server);
  });
});
