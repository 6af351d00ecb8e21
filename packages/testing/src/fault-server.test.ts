import { Agent, request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { connect, type Socket } from "node:net";
import { action, type Operation, sleep, spawn, timeout, until } from "@keel/core";
import {
  createFaultServer,
  createHarness,
  createVirtualClock,
  type FaultServer,
  type Harness,
} from "@keel/testing";
import { beforeEach, describe, expect, it } from "vitest";

// ---------------------------------------------------------------------------------------------
// Clients: plain node:http and node:net wrapped in Keel operations, each keeping the client's side
// of the autojump protocol: hold (keyed by the origin) from dispatch until the request is written,
// plus one setImmediate; hold for one setImmediate after destroying a socket.

interface HttpResult {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

const holdFor = (h: Harness, what: string, key?: string) => {
  const release = h.clock.hold(what, key);
  return () => setImmediate(release);
};

/** One request over node:http; marks `headers <status>`, `body <text>` per chunk and `end`. */
function fetchOnce(
  h: Harness,
  url: string,
  init: { method?: string; body?: string; headers?: Record<string, string>; agent?: Agent } = {},
): Operation<HttpResult> {
  return action<HttpResult>((resolve, reject) => {
    const key = new URL(url).host;
    let sending: (() => void) | null = holdFor(h, `client ${url}: sending`, key);
    const sent = () => {
      sending?.();
      sending = null;
    };
    let settled = false;
    const req = httpRequest(url, {
      method: init.method ?? "GET",
      headers: init.headers,
      agent: init.agent ?? false,
    });
    req.on("finish", sent);
    req.on("error", (e: NodeJS.ErrnoException) => {
      sent();
      if (settled) return;
      settled = true;
      h.mark(`error ${e.code}`);
      reject(e);
    });
    req.on("response", (res) => {
      h.mark(`headers ${res.statusCode}`);
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        h.mark(`body ${chunk}`);
        body += chunk;
      });
      res.on("end", () => {
        h.mark("end");
        settled = true;
        resolve({ status: res.statusCode!, headers: res.headers, body });
      });
    });
    req.end(init.body);
    return () => {
      sent();
      if (!settled) {
        settled = true;
        req.destroy();
        holdFor(h, "client: destroyed")();
      }
    };
  }, `fetchOnce ${url}`);
}

/** What a raw exchange saw, in order: `rx <bytes>` (merged per instant), `end`, `error CODE`, `close`. */
interface RawResult {
  timeline: string[];
  text: string;
}

/** Writes `GET path` on a raw socket and records every byte and how the connection ended. */
function rawExchange(h: Harness, url: string, path: string): Operation<RawResult> {
  return action<RawResult>((resolve) => {
    const { hostname, port, host } = new URL(url);
    const timeline: string[] = [];
    let text = "";
    let rx = 0;
    let rxAt = -1;
    const note = (what: string) => timeline.push(`${what}@${h.clock.now()}`);
    let sending: (() => void) | null = holdFor(h, `raw client ${path}: sending`, host);
    const sent = () => {
      sending?.();
      sending = null;
    };
    const socket: Socket = connect({ host: hostname, port: Number(port) }, () => {
      note("connected");
      socket.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\n\r\n`, sent);
    });
    socket.setEncoding("latin1");
    socket.on("data", (d: string) => {
      text += d;
      if (rxAt === h.clock.now()) {
        rx += d.length;
        timeline[timeline.length - 1] = `rx ${rx}@${rxAt}`;
      } else {
        rx = d.length;
        rxAt = h.clock.now();
        note(`rx ${rx}`);
      }
    });
    // From the peer's FIN or RST until the socket has closed here, the client is closing it: hold.
    let closing: (() => void) | null = null;
    socket.on("end", () => {
      note("end");
      closing ??= holdFor(h, "raw client: closing", host);
    });
    socket.on("error", (e: NodeJS.ErrnoException) => {
      sent();
      note(`error ${e.code}`);
      closing ??= holdFor(h, "raw client: closing", host);
    });
    socket.on("close", () => {
      note("close");
      closing?.();
      resolve({ timeline, text });
    });
    return () => {
      sent();
      if (!socket.destroyed) {
        socket.destroy();
        holdFor(h, "raw client: destroyed")();
      }
    };
  }, `rawExchange ${path}`);
}

// ---------------------------------------------------------------------------------------------
// The leak check: no live task or timer, no hold, no server-side socket, no handle left behind.

const watched = ["TCPSocketWrap", "TCPServerWrap", "ProcessWrap", "PipeWrap", "TCPWrap"];
const handles = () => {
  const counts: Record<string, number> = {};
  for (const r of process.getActiveResourcesInfo()) if (watched.includes(r)) counts[r] = (counts[r] ?? 0) + 1;
  return counts;
};
let baseline: Record<string, number> = {};
beforeEach(() => {
  baseline = handles();
});

async function settle(until: () => boolean): Promise<void> {
  for (let i = 0; i < 2000 && !until(); i++) await new Promise((r) => setImmediate(r));
}

async function expectAllClosed(h: Harness, server: FaultServer | null): Promise<void> {
  await h.expectClean();
  await settle(() => h.clock.holds === 0 && JSON.stringify(handles()) === JSON.stringify(baseline));
  expect(h.clock.holdDescriptions).toEqual([]);
  if (server) {
    expect(server.openSockets).toBe(0);
    expect(server.connections.filter((c) => c.closedAt === null)).toEqual([]);
  }
  expect(handles()).toEqual(baseline);
}

/** Runs `op` under `timeout(ms)`, marking `timed out` instead of throwing the TimeoutError. */
function* giveUpAfter<T>(h: Harness, ms: number, op: Operation<T>): Operation<T | null> {
  try {
    return yield* timeout(ms, op);
  } catch (e) {
    if (!(e instanceof Error && e.name === "TimeoutError")) throw e;
    h.mark("timed out");
    return null;
  }
}

// ---------------------------------------------------------------------------------------------

describe("fault server: answering", () => {
  it("a bare number answers with that status and an empty body", async () => {
    const h = createHarness();
    let server: FaultServer | null = null;
    const result = await h.run(function* () {
      server = yield* createFaultServer({ "/created": 201 }, { connectHang: false });
      return yield* fetchOnce(h, `${server.url}/created`);
    });
    expect(result).toMatchObject({ status: 201, body: "" });
    expect(result.headers["content-length"]).toBe("0");
    expect(h.log).toEqual(["headers 201@0", "end@0"]);
    await expectAllClosed(h, server);
  });

  it("json answers after delayMs on the virtual clock, with content-type and content-length", async () => {
    const h = createHarness();
    let server: FaultServer | null = null;
    const result = await h.run(function* () {
      server = yield* createFaultServer({ "/slow": { status: 200, json: { ok: true }, delayMs: 250 } });
      yield* sleep(10);
      // The pending 10 s timer would be jumped to if the server let time go before its answer arrived.
      return yield* timeout(10_000, fetchOnce(h, `${server.url}/slow`));
    });
    expect(result.body).toBe('{"ok":true}');
    expect(result.headers["content-type"]).toBe("application/json");
    expect(result.headers["content-length"]).toBe("11");
    expect(h.log).toEqual(["headers 200@260", 'body {"ok":true}@260', "end@260"]);
    expect(server!.requests.map((r) => r.arrivedAt)).toEqual([10]);
    await expectAllClosed(h, server);
  });

  it("a runtime ticking every 1 ms does not move an arrival or an answer off its instant", async () => {
    const h = createHarness();
    let server: FaultServer | null = null;
    let ticks = 0;
    await h.run(function* () {
      server = yield* createFaultServer(
        { "/slow": { status: 200, body: "late", delayMs: 40 } },
        { connectHang: false },
      );
      const ticker = yield* spawn(function* tick() {
        for (;;) {
          yield* sleep(1);
          ticks++;
        }
      });
      yield* sleep(7);
      yield* fetchOnce(h, `${server.url}/slow`);
      yield* fetchOnce(h, `${server.url}/slow`);
      yield* ticker.cancel();
    });
    expect(h.log).toEqual([
      "headers 200@47",
      "body late@47",
      "end@47",
      "headers 200@87",
      "body late@87",
      "end@87",
    ]);
    expect(server!.requests.map((r) => r.arrivedAt)).toEqual([7, 47]);
    expect(ticks).toBe(87);
    await expectAllClosed(h, server);
  });

  it("a sequence gives the n-th request the n-th behaviour and repeats the last", async () => {
    const h = createHarness();
    let server: FaultServer | null = null;
    const statuses = await h.run(function* () {
      server = yield* createFaultServer(
        { "/flaky": [503, { status: 500, body: "oops" }, 200] },
        { connectHang: false },
      );
      const seen: number[] = [];
      for (let i = 0; i < 4; i++) seen.push((yield* fetchOnce(h, `${server.url}/flaky`)).status);
      return seen;
    });
    expect(statuses).toEqual([503, 500, 200, 200]);
    expect(server!.requests.map((r) => [r.route, r.index])).toEqual([
      ["/flaky", 0],
      ["/flaky", 1],
      ["/flaky", 2],
      ["/flaky", 3],
    ]);
    expect([server!.hits("/flaky"), server!.hits("GET /flaky"), server!.hits("POST /flaky")]).toEqual([
      4, 4, 0,
    ]);
    await expectAllClosed(h, server);
  });

  it("retryAfter sets Retry-After from seconds, a Date or a string; Date is the clock's time", async () => {
    const h = createHarness({ start: 3000 });
    let server: FaultServer | null = null;
    const results = await h.run(function* () {
      server = yield* createFaultServer(
        {
          "/seconds": { status: 503, retryAfter: 2 },
          "/date": { status: 429, retryAfter: new Date(5000) },
          "/text": { status: 503, retryAfter: "soon", headers: { "X-Why": "maintenance" } },
        },
        { connectHang: false },
      );
      const out: HttpResult[] = [];
      for (const p of ["/seconds", "/date", "/text"]) out.push(yield* fetchOnce(h, `${server.url}${p}`));
      return out;
    });
    expect(results.map((r) => [r.status, r.headers["retry-after"]])).toEqual([
      [503, "2"],
      [429, "Thu, 01 Jan 1970 00:00:05 GMT"],
      [503, "soon"],
    ]);
    expect(results[0]!.headers.date).toBe("Thu, 01 Jan 1970 00:00:03 GMT");
    expect(results[2]!.headers["x-why"]).toBe("maintenance");
    await expectAllClosed(h, server);
  });

  it("a METHOD route wins over its path, '*' catches the rest, the query is ignored", async () => {
    const h = createHarness();
    let server: FaultServer | null = null;
    const statuses = await h.run(function* () {
      server = yield* createFaultServer(
        { "post /items": 201, "/items": 200, "*": 418 },
        { connectHang: false },
      );
      return [
        (yield* fetchOnce(h, `${server.url}/items`, { method: "POST", body: "{}" })).status,
        (yield* fetchOnce(h, `${server.url}/items?page=2`)).status,
        (yield* fetchOnce(h, `${server.url}/other`)).status,
      ];
    });
    expect(statuses).toEqual([201, 200, 418]);
    expect(server!.requests.map((r) => `${r.method} ${r.path} -> ${r.route}`)).toEqual([
      "POST /items -> POST /items",
      "GET /items?page=2 -> /items",
      "GET /other -> *",
    ]);
    await expectAllClosed(h, server);
  });

  it("a request no route matches gets a JSON 404 and is recorded with route null", async () => {
    const h = createHarness();
    let server: FaultServer | null = null;
    const result = await h.run(function* () {
      server = yield* createFaultServer({ "/known": 200 }, { connectHang: false });
      return yield* fetchOnce(h, `${server.url}/unknown?x=1`);
    });
    expect(result.status).toBe(404);
    expect(JSON.parse(result.body)).toEqual({ error: "fault server: no route for GET /unknown" });
    expect(server!.requests[0]).toMatchObject({ route: null, path: "/unknown?x=1" });
    await expectAllClosed(h, server);
  });
});

describe("fault server: records", () => {
  it("records method, path, headers, body, arrival and connection, and sees reuse", async () => {
    const h = createHarness();
    let server: FaultServer | null = null;
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    await h.run(function* () {
      server = yield* createFaultServer({ "/echo": { status: 200, body: "ok" } }, { connectHang: false });
      yield* fetchOnce(h, `${server.url}/echo?x=1`, {
        method: "POST",
        body: "hello",
        headers: { "x-test": "yes", "content-type": "text/plain" },
        agent,
      });
      yield* sleep(30);
      yield* fetchOnce(h, `${server.url}/echo`, { agent });
      yield* sleep(20);
      agent.destroy();
      yield* sleep(50);
    });
    const [first, second] = server!.requests;
    expect(first).toMatchObject({
      method: "POST",
      path: "/echo?x=1",
      body: "hello",
      arrivedAt: 0,
      connectionId: 1,
    });
    expect(first!.headers["x-test"]).toBe("yes");
    expect(second).toMatchObject({ method: "GET", path: "/echo", body: "", arrivedAt: 30, connectionId: 1 });
    expect(server!.connections).toHaveLength(1);
    // The agent's close at 50 is seen at 50, though the body went on sleeping until 100.
    expect(server!.connections[0]).toMatchObject({ id: 1, openedAt: 0, closedAt: 50 });
    expect(server!.connections[0]!.bytesWritten).toBeGreaterThan(2 * "HTTP/1.1 200 OK\r\n\r\nok".length);
    await expectAllClosed(h, server);
  });

  it("the server can run on a clock given in options instead of the runtime's", async () => {
    const h = createHarness();
    const other = createVirtualClock({ start: 1000, autojump: false });
    let server: FaultServer | null = null;
    const result = await h.run(function* () {
      server = yield* createFaultServer({ "/x": 200 }, { clock: other, connectHang: false });
      return yield* fetchOnce(h, `${server.url}/x`);
    });
    expect(result.headers.date).toBe("Thu, 01 Jan 1970 00:00:01 GMT");
    expect(server!.requests[0]!.arrivedAt).toBe(1000);
    expect(server!.connections[0]).toMatchObject({ openedAt: 1000, closedAt: 1000 });
    await expectAllClosed(h, server);
    expect(other.holdDescriptions).toEqual([]);
  });
});

describe("fault server: hanging and dripping", () => {
  it("hang before-headers never answers: the client's timeout fires on time and the close is seen then", async () => {
    const h = createHarness();
    let server: FaultServer | null = null;
    await h.run(function* () {
      server = yield* createFaultServer({ "/hang": { hang: "before-headers" } }, { connectHang: false });
      yield* giveUpAfter(h, 1000, fetchOnce(h, `${server.url}/hang`));
      yield* sleep(500);
    });
    expect(h.log).toEqual(["timed out@1000"]);
    expect(server!.requests[0]!.arrivedAt).toBe(0);
    expect(server!.connections[0]).toMatchObject({ closedAt: 1000, bytesWritten: 0 });
    await expectAllClosed(h, server);
  });

  it("hang after-headers sends the head and then nothing", async () => {
    const h = createHarness();
    let server: FaultServer | null = null;
    await h.run(function* () {
      server = yield* createFaultServer(
        { "/stall": { hang: "after-headers", status: 202, delayMs: 40 } },
        { connectHang: false },
      );
      yield* giveUpAfter(h, 300, fetchOnce(h, `${server.url}/stall`));
      yield* sleep(100);
    });
    expect(h.log).toEqual(["headers 202@40", "timed out@300"]);
    expect(server!.connections[0]!.closedAt).toBe(300);
    await expectAllClosed(h, server);
  });

  it("drip sends the head after headersDelayMs, then one chunk every everyMs, the last ending the body", async () => {
    const h = createHarness();
    let server: FaultServer | null = null;
    const result = await h.run(function* () {
      server = yield* createFaultServer(
        { "/drip": { drip: { chunk: "ab", everyMs: 10, count: 3 }, headersDelayMs: 5 } },
        { connectHang: false },
      );
      return yield* timeout(10_000, fetchOnce(h, `${server.url}/drip`));
    });
    expect(h.log).toEqual(["headers 200@5", "body ab@15", "body ab@25", "body ab@35", "end@35"]);
    expect(result.headers["content-length"]).toBe("6");
    await expectAllClosed(h, server);
  });

  it("drip with a byte count and count Infinity drips that many bytes forever, chunked", async () => {
    const h = createHarness();
    let server: FaultServer | null = null;
    await h.run(function* () {
      server = yield* createFaultServer(
        { "/forever": { drip: { chunk: 4, everyMs: 100, count: Infinity } } },
        { connectHang: false },
      );
      yield* giveUpAfter(h, 350, fetchOnce(h, `${server.url}/forever`));
      yield* sleep(1000);
    });
    expect(h.log).toEqual([
      "headers 200@0",
      "body xxxx@100",
      "body xxxx@200",
      "body xxxx@300",
      "timed out@350",
    ]);
    expect(server!.connections[0]!.closedAt).toBe(350);
    await expectAllClosed(h, server);
  });

  it("drip with count 0 sends the head and an empty body at the delay", async () => {
    const h = createHarness();
    let server: FaultServer | null = null;
    const result = await h.run(function* () {
      server = yield* createFaultServer(
        { "/none": { drip: { chunk: "a", everyMs: 10, count: 0 }, delayMs: 20 } },
        { connectHang: false },
      );
      return yield* fetchOnce(h, `${server.url}/none`);
    });
    expect(h.log).toEqual(["headers 200@20", "end@20"]);
    expect(result).toMatchObject({ status: 200, body: "" });
    await expectAllClosed(h, server);
  });

  it("a client that gives up during a delay cancels the server's timer, and its close is seen at once", async () => {
    const h = createHarness();
    let server: FaultServer | null = null;
    let pendingAfter: readonly number[] = [];
    await h.run(function* () {
      server = yield* createFaultServer({ "/slow": { status: 200, delayMs: 1000 } }, { connectHang: false });
      yield* giveUpAfter(h, 100, fetchOnce(h, `${server.url}/slow`));
      yield* sleep(1);
      pendingAfter = [...h.clock.pendingTimerInstants];
      yield* sleep(2000);
    });
    expect(h.log).toEqual(["timed out@100"]);
    expect(pendingAfter).toEqual([]);
    expect(server!.connections[0]).toMatchObject({ closedAt: 100, bytesWritten: 0 });
    await expectAllClosed(h, server);
  });
});

describe("fault server: resets and closes", () => {
  it("reset after-headers: the client reads the head, then ECONNRESET, at the delay", async () => {
    const h = createHarness();
    let server: FaultServer | null = null;
    const raw = await h.run(function* () {
      server = yield* createFaultServer(
        { "/r": { reset: "after-headers", status: 200, delayMs: 20 } },
        { connectHang: false },
      );
      return yield* timeout(10_000, rawExchange(h, server.url, "/r"));
    });
    const written = server!.connections[0]!.bytesWritten;
    expect(raw.timeline).toEqual(["connected@0", `rx ${written}@20`, "error ECONNRESET@20", "close@20"]);
    expect(raw.text).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\n$/);
    expect(server!.connections[0]!.closedAt).toBe(20);
    await expectAllClosed(h, server);
  });

  it("reset mid-body: exactly afterBytes body bytes arrive, under a longer content-length, then ECONNRESET", async () => {
    const h = createHarness();
    let server: FaultServer | null = null;
    const [a, b] = await h.run(function* () {
      server = yield* createFaultServer(
        {
          "/m": { reset: "mid-body", afterBytes: 100 },
          "/t": { reset: "mid-body", afterBytes: 10, totalBytes: 50 },
        },
        { connectHang: false },
      );
      return [yield* rawExchange(h, server.url, "/m"), yield* rawExchange(h, server.url, "/t")];
    });
    const [head, body] = a!.text.split("\r\n\r\n");
    expect(head).toContain("content-length: 1124");
    expect(body).toBe("x".repeat(100));
    expect(a!.timeline).toEqual([
      "connected@0",
      `rx ${server!.connections[0]!.bytesWritten}@0`,
      "error ECONNRESET@0",
      "close@0",
    ]);
    expect(b!.text).toContain("content-length: 50");
    expect(b!.text.split("\r\n\r\n")[1]).toBe("x".repeat(10));
    expect(b!.timeline.slice(-2)).toEqual(["error ECONNRESET@0", "close@0"]);
    await expectAllClosed(h, server);
  });

  it("reset before-headers: ECONNRESET without a byte", async () => {
    const h = createHarness();
    let server: FaultServer | null = null;
    const raw = await h.run(function* () {
      server = yield* createFaultServer(
        { "/r": { reset: "before-headers", delayMs: 15 } },
        { connectHang: false },
      );
      return yield* rawExchange(h, server.url, "/r");
    });
    expect(raw.timeline).toEqual(["connected@0", "error ECONNRESET@15", "close@15"]);
    expect(server!.connections[0]).toMatchObject({ bytesWritten: 0, closedAt: 15 });
    await expectAllClosed(h, server);
  });

  it("close without-response: a clean FIN without a byte", async () => {
    const h = createHarness();
    let server: FaultServer | null = null;
    const raw = await h.run(function* () {
      server = yield* createFaultServer(
        { "/c": { close: "without-response", delayMs: 30 } },
        { connectHang: false },
      );
      return yield* timeout(10_000, rawExchange(h, server.url, "/c"));
    });
    expect(raw.timeline).toEqual(["connected@0", "end@30", "close@30"]);
    expect(server!.connections[0]).toMatchObject({ bytesWritten: 0, closedAt: 30 });
    await expectAllClosed(h, server);
  });
});

describe("fault server: connecting", () => {
  it("refusedUrl refuses the connect at once", async () => {
    const h = createHarness();
    let server: FaultServer | null = null;
    let code: string | undefined;
    await h.run(function* () {
      server = yield* createFaultServer({}, { connectHang: false });
      try {
        yield* timeout(10_000, fetchOnce(h, `${server.refusedUrl}/x`));
      } catch (e) {
        code = (e as NodeJS.ErrnoException).code;
      }
    });
    expect(code).toBe("ECONNREFUSED");
    expect(h.log).toEqual(["error ECONNREFUSED@0"]);
    await expectAllClosed(h, server);
  });

  it("a connect to connectHangUrl never completes, and virtual time still jumps past it", async () => {
    const h = createHarness();
    let server: FaultServer | null = null;
    let raw: RawResult | null = null;
    const started = performance.now();
    await h.run(function* () {
      server = yield* createFaultServer({});
      raw = yield* giveUpAfter(h, 5000, rawExchange(h, server.connectHangUrl, "/x"));
    });
    expect(raw).toBe(null);
    expect(h.log).toEqual(["timed out@5000"]);
    // Real time: far less than the 5 s of virtual time, so the wait was never real.
    expect(performance.now() - started).toBeLessThan(4000);
    await expectAllClosed(h, server);
  });

  it("releaseConnectHang lets a hung connect complete and be served here; the origin stops being idle", async () => {
    const h = createHarness();
    let server: FaultServer | null = null;
    const holdsCounted: number[] = [];
    let before: string[] = [];
    let waitedMs = 0;
    const result = await h.run(function* () {
      server = yield* createFaultServer({ "/after": { status: 200, body: "served", delayMs: 25 } });
      const origin = new URL(server.connectHangUrl).host;
      const probe = () => {
        const release = h.clock.hold("probe", origin);
        holdsCounted.push(h.clock.holdDescriptions.filter((d) => d === "probe").length);
        release();
      };
      probe();
      const request = yield* spawn(() => fetchOnce(h, `${server!.connectHangUrl}/after`));
      // Real time: a loopback connect takes microseconds; this one is still waiting after 200 ms.
      yield* until(new Promise((r) => setTimeout(r, 200)));
      before = [...h.log];
      server.releaseConnectHang();
      server.releaseConnectHang();
      probe();
      const t0 = performance.now();
      const response = yield* request;
      waitedMs = performance.now() - t0;
      return response;
    });
    expect(holdsCounted).toEqual([0, 1]);
    expect(before).toEqual([]);
    // Served by the fault server itself, on its clock and in its records.
    expect(result).toMatchObject({ status: 200, body: "served" });
    expect(h.log).toEqual(["headers 200@25", "body served@25", "end@25"]);
    expect(server!.requests.map((r) => `${r.path}@${r.arrivedAt}`)).toEqual(["/after@0"]);
    expect(server!.connections).toHaveLength(1);
    // The SYN is retransmitted about 1 s after the connect began; allow a slow machine.
    expect(waitedMs).toBeLessThan(8000);
    await expectAllClosed(h, server);
  }, 15_000);
});

describe("fault server: without a connect-hang listener", () => {
  it("connectHangUrl and releaseConnectHang throw, naming the option", async () => {
    const h = createHarness();
    let server: FaultServer | null = null;
    const errors = await h.run(function* () {
      server = yield* createFaultServer({}, { connectHang: false });
      const s = server;
      return [() => s.connectHangUrl, () => s.releaseConnectHang()].map((f) => {
        try {
          f();
          return "no error";
        } catch (e) {
          return (e as Error).message;
        }
      });
    });
    expect(errors).toEqual([
      "fault server: connectHangUrl: the server was created with { connectHang: false }",
      "fault server: releaseConnectHang(): the server was created with { connectHang: false }",
    ]);
    await expectAllClosed(h, server);
  });
});

describe("fault server: teardown", () => {
  it("when its scope ends, every socket is destroyed, the listeners closed and the child ended", async () => {
    const h = createHarness();
    let server: FaultServer | null = null;
    let client: Socket | null = null;
    let hung: Socket | null = null;
    const clientSaw: string[] = [];
    await h.run(function* () {
      server = yield* createFaultServer({ "/stall": { hang: "after-headers" } });
      const { port } = new URL(server.url);
      yield* action<void>((resolve) => {
        client = connect({ host: "127.0.0.1", port: Number(port) });
        client.write("GET /stall HTTP/1.1\r\nHost: x\r\n\r\n");
        client.once("data", () => resolve());
        client.on("end", () => clientSaw.push("end"));
        client.on("error", (e: NodeJS.ErrnoException) => clientSaw.push(e.code ?? "error"));
        client.on("close", () => clientSaw.push("close"));
        return () => {};
      });
      hung = connect({ host: "127.0.0.1", port: Number(new URL(server.connectHangUrl).port) });
      hung.on("error", () => {});
      expect(server.openSockets).toBe(1);
      yield* sleep(70);
    });
    expect(server!.openSockets).toBe(0);
    expect(server!.connections.map((c) => c.closedAt)).toEqual([70]);
    await settle(() => clientSaw.includes("close"));
    expect(clientSaw.at(-1)).toBe("close");
    (hung as Socket | null)?.destroy();
    (client as Socket | null)?.destroy();
    await expectAllClosed(h, server);
  });
});

describe("fault server: scripts are checked before anything starts", () => {
  it("a malformed script throws at once, naming the route and the field", async () => {
    const h = createHarness();
    const make = (routes: unknown) => () => createFaultServer(routes as never);
    expect(make({ "/x": { status: 200, delay: 5 } })).toThrow(
      new TypeError(
        'createFaultServer(routes)["/x"].delay: not a field of this behaviour (allowed: status, headers, retryAfter, json, body, delayMs)',
      ),
    );
    expect(make({ "/x": [200, { delayMs: -5 }] })).toThrow(
      new RangeError('createFaultServer(routes)["/x"][1].delayMs: expected a finite number ≥ 0, got -5'),
    );
    expect(make({ "/x": 42 })).toThrow(RangeError);
    expect(make({ x: 200 })).toThrow(/a route is "\/path", "METHOD \/path" or "\*"/);
    expect(make({ "/x?q=1": 200 })).toThrow(TypeError);
    expect(make({ "/x": [] })).toThrow(RangeError);
    expect(make({ "/x": { hang: "before-headers", close: "without-response" } })).toThrow(
      /one behaviour at a time, got hang and close/,
    );
    expect(make({ "/x": { drip: { chunk: "a", everyMs: 0, count: Infinity } } })).toThrow(RangeError);
    expect(make({ "/x": { drip: { chunk: "", everyMs: 1, count: 1 } } })).toThrow(TypeError);
    expect(make({ "/x": { reset: "mid-body", afterBytes: 10, totalBytes: 10 } })).toThrow(RangeError);
    expect(make({ "/x": { reset: "sideways" } })).toThrow(/reset: expected "before-headers"/);
    expect(make({ "/x": { json: 1, body: "b" } })).toThrow(/json or body, not both/);
    expect(make({ "/x": { retryAfter: new Date(Number.NaN) } })).toThrow(TypeError);
    expect(make({ "get /x": 200, "GET /x": 201 })).toThrow(/given twice/);
    expect(make(null)).toThrow(TypeError);
    await h.expectClean();
  });
});
