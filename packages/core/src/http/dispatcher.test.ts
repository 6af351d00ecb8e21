/**
 * `createHttpClient({ dispatcher })`: a user's undici dispatcher (a real ProxyAgent through a real
 * CONNECT proxy on 127.0.0.1, a MockAgent, a composed interceptor) keeps the phased limits and
 * destroys the socket of a request it abandons, seen from the target server's side.
 */
import { createServer, type Server } from "node:http";
import { connect, type Socket } from "node:net";
import { constant, run, spawn, until } from "@keel/core";
import { createHttpClient, HttpTimeoutError } from "@keel/core/http";
import { Agent, type Dispatcher, MockAgent, ProxyAgent } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openSocketsAfter } from "../../test/support/http.js";

let target: Server;
let proxy: Server;
let origin = "";
let proxyUrl = "";
const targetSockets = new Set<Socket>();
const tunnels: string[] = [];
/** The server's socket that carried the last `/hang`, and a wake-up for its arrival. */
let hangSocket: Socket | null = null;
let onHang: (() => void) | null = null;

function listen(server: Server): Promise<string> {
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve(`http://127.0.0.1:${(server.address() as { port: number }).port}`),
    ),
  );
}

beforeAll(async () => {
  target = createServer((req, res) => {
    if (req.url === "/hang") {
      hangSocket = req.socket;
      onHang?.();
      return; // never answers
    }
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ path: req.url }));
  });
  target.on("connection", (s: Socket) => {
    targetSockets.add(s);
    s.on("close", () => targetSockets.delete(s));
  });
  // A CONNECT proxy: one tunnel per CONNECT, each side closed when the other ends.
  proxy = createServer((_, res) => {
    res.statusCode = 405;
    res.end();
  });
  proxy.on("connect", (req, client: Socket, head: Buffer) => {
    tunnels.push(req.url ?? "");
    const [host, port] = (req.url ?? "").split(":");
    const upstream = connect(Number(port), host, () => {
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    const close = () => {
      upstream.destroy();
      client.destroy();
    };
    // The server's sockets allow half-open: a side's end is the tunnel's end.
    upstream.on("error", close).on("end", close).on("close", close);
    client.on("error", close).on("end", close).on("close", close);
  });
  origin = await listen(target);
  proxyUrl = await listen(proxy);
});

afterAll(async () => {
  for (const s of targetSockets) s.destroy();
  proxy.closeAllConnections();
  await Promise.all([target, proxy].map((s) => new Promise((r) => s.close(r))));
});

describe("a dispatcher of the user's", () => {
  it("a ProxyAgent tunnels through a real CONNECT proxy, and cancelling a request on the wire closes its tunnel to the server", async () => {
    const dispatcher = new ProxyAgent({ uri: proxyUrl, proxyTunnel: true });
    const arrived = new Promise<void>((r) => {
      onHang = r;
    });
    try {
      const out = await run(function* () {
        const client = yield* createHttpClient({ baseUrl: origin, dispatcher, retry: false });
        const body = yield* client.getJson("/orders/7");
        const call = yield* spawn(() => client.get("/hang"));
        yield* until(arrived);
        yield* call.cancel();
        return { body, state: call.state };
      });
      expect(out).toEqual({ body: { path: "/orders/7" }, state: "cancelled" });
      expect(tunnels).toContain(origin.replace("http://", ""));
      const carried = hangSocket as Socket | null;
      // The cancelled request's tunnel is closed at once, seen from the server.
      const bound = Date.now() + 2000;
      while (carried && !carried.destroyed && Date.now() < bound) await new Promise((r) => setTimeout(r, 10));
      expect(carried?.destroyed).toBe(true);
    } finally {
      await dispatcher.close();
    }
    // The pooled tunnel of the first request was the dispatcher's, closed with it.
    expect(await openSocketsAfter(targetSockets, 2000)).toBe(0);
  });

  it("the client's phase limits hold over a user's dispatcher: headersMs ends a request its proxy holds", async () => {
    const dispatcher = new ProxyAgent({ uri: proxyUrl, proxyTunnel: true });
    try {
      const phase = await run(function* () {
        const client = yield* createHttpClient({
          baseUrl: origin,
          dispatcher,
          retry: false,
          timeouts: { headersMs: 40 },
        });
        try {
          yield* client.get("/hang");
          return null;
        } catch (e) {
          if (e instanceof HttpTimeoutError) return e.phase;
          throw e;
        }
      });
      expect(phase).toBe("headers");
      expect(await openSocketsAfter(targetSockets, 2000)).toBe(0);
    } finally {
      await dispatcher.close();
    }
  });

  it("a MockAgent answers in place of the network: retried 503, then the JSON", async () => {
    const mock = new MockAgent();
    mock.disableNetConnect();
    const pool = mock.get("http://orders.internal");
    pool.intercept({ path: "/orders/7" }).reply(503, "busy");
    pool
      .intercept({ path: "/orders/7" })
      .reply(200, { id: 7 }, { headers: { "content-type": "application/json" } });
    try {
      const order = await run(function* () {
        const client = yield* createHttpClient({
          baseUrl: "http://orders.internal",
          dispatcher: mock,
          retry: { attempts: 2, backoff: constant(0) },
        });
        return yield* client.getJson("/orders/7");
      });
      expect(order).toEqual({ id: 7 });
      mock.assertNoPendingInterceptors();
    } finally {
      await mock.close();
    }
  });

  it("a composed dispatcher's interceptor sees every attempt, and the client leaves the dispatcher open", async () => {
    const seen: string[] = [];
    const agent = new Agent();
    const dispatcher: Dispatcher = agent.compose((dispatch) => (opts, handler) => {
      seen.push(`${opts.method} ${opts.path}`);
      return dispatch(opts, handler);
    });
    try {
      const body = await run(function* () {
        const client = yield* createHttpClient({ baseUrl: origin, dispatcher });
        return yield* client.getJson("/a");
      });
      expect(body).toEqual({ path: "/a" });
      expect(seen).toEqual(["GET /a"]);
      expect(agent.destroyed || agent.closed).toBe(false);
    } finally {
      await agent.close();
    }
  });

  it("a dispatcher that is not one is a TypeError naming the option", async () => {
    await expect(run(() => createHttpClient({ dispatcher: {} as Dispatcher }))).rejects.toThrow(
      /createHttpClient\(\{ dispatcher \}\)/,
    );
  });
});
