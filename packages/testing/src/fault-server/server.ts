/**
 * `createFaultServer`: a real HTTP server on loopback that misbehaves on purpose, scripted per
 * route, for testing HTTP clients against slow, hanging, dripping, resetting and refusing peers.
 * @module
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { action, type Clock, type Operation, resource, until, useClock } from "@keel/core";
import { perform } from "./behaviours.js";
import { type ConnectHang, startConnectHang } from "./connect-hang.js";
import { type ConnectionRecord, createRecorder, type RequestRecord } from "./records.js";
import { findRefusedPort } from "./refused-port.js";
import { parseBehaviour, parseRoutes } from "./routes.js";
import type { RouteScript } from "./script.js";

/**
 * Options of {@link createFaultServer}.
 *
 * @example
 * ```ts
 * import type { FaultServerOptions } from "@keel/testing";
 * const options: FaultServerOptions = { connectHang: false };
 * console.log(options.connectHang); // false
 * ```
 */
export interface FaultServerOptions {
  /** The clock scripted delays run on and records are stamped with (default: the runtime's). */
  clock?: Clock;
  /** Start the connect-hang listener, a child process (default true; `false` saves ~50 ms). */
  connectHang?: boolean;
}

/**
 * A running fault server, with what it has seen so far. Records are live: read them at any time.
 *
 * @example
 * ```ts
 * import { action, run, scoped } from "@keel/core";
 * import { createFaultServer } from "@keel/testing";
 * import { connect } from "node:net";
 * const code = await run(() => scoped(function* () {
 *   const server = yield* createFaultServer({}, { connectHang: false });
 *   const { port } = new URL(server.refusedUrl);
 *   return yield* action<string>((resolve) => {
 *     const socket = connect({ host: "127.0.0.1", port: Number(port) });
 *     socket.on("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? "?"));
 *     socket.on("connect", () => resolve("connected"));
 *     return () => socket.destroy();
 *   });
 * }));
 * console.log(code); // ECONNREFUSED
 * ```
 */
export interface FaultServer {
  /** `http://127.0.0.1:PORT`, no trailing slash. */
  readonly url: string;
  /** A loopback URL where nothing listens: connects fail at once with `ECONNREFUSED`. */
  readonly refusedUrl: string;
  /**
   * A loopback URL whose connects never complete (a full accept queue), while its origin
   * `127.0.0.1:PORT` is declared idle on a virtual clock, so a client's connect holds do not stop
   * autojump. Throws when the server was created with `connectHang: false`.
   */
  readonly connectHangUrl: string;
  /**
   * Frees the connect-hang listener: hung connects complete at their next SYN retransmission (about
   * 1 s after they started, real time), and from then on its connections are served by this server
   * (same routes, holds and records, like connections to {@link FaultServer.url}). The origin stops
   * being idle, so a client's connect holds count again. Idempotent. Throws like
   * {@link FaultServer.connectHangUrl} when there is no connect-hang listener.
   */
  releaseConnectHang(): void;
  /** Every request, in arrival order. */
  readonly requests: readonly RequestRecord[];
  /** Every accepted connection, in accept order. */
  readonly connections: readonly ConnectionRecord[];
  /** Server-side sockets open now. */
  readonly openSockets: number;
  /** Requests to `path` (query left out), any method; `"GET /path"` counts only that method. */
  hits(path: string): number;
}

const noHang = (what: string) =>
  new Error(`fault server: ${what}: the server was created with { connectHang: false }`);

/** The path of a request target, query left out (origin-form, absolute-form, or anything else). */
function pathOf(target: string): string {
  try {
    return new URL(target, "http://fault.invalid").pathname;
  } catch {
    return target.split("?", 1)[0]!;
  }
}

function notFound(method: string, pathname: string) {
  return parseBehaviour("fault server", {
    status: 404,
    json: { error: `fault server: no route for ${method} ${pathname}` },
  });
}

/**
 * Starts a fault server: a real HTTP/1.1 server on `127.0.0.1:0` that answers each route as its
 * {@link RouteScript} says. Routes are `"/path"`, `"METHOD /path"` (checked first) or `"*"`
 * (anything else); other requests get a 404 with a JSON `error`. A request's behaviour starts once
 * its body has been read; its delays count from its arrival (the moment its head was read).
 *
 * The server is a resource of the calling scope: when that scope ends, every socket is destroyed,
 * the listeners closed and the connect-hang child killed, and the teardown waits for all of it.
 *
 * **Time**: every scripted delay is a timer on the runtime's clock (or `options.clock`), and
 * `arrivedAt`, `openedAt`, `closedAt` and the `Date` header are that clock's time. On a virtual
 * clock with autojump, the server holds the clock while it has real work in flight (from a
 * request's arrival until what it wrote has reached the client) and holds nothing while it waits
 * on purpose, so a test runs instantly and sees every byte at its scripted instant.
 *
 * @example
 * ```ts
 * import { run, scoped, until } from "@keel/core";
 * import { createFaultServer } from "@keel/testing";
 * const statuses = await run(() => scoped(function* () {
 *   const server = yield* createFaultServer({ "/flaky": [503, { status: 200, json: { ok: true } }] });
 *   const seen: number[] = [];
 *   for (let i = 0; i < 3; i++) {
 *     const res = yield* until(fetch(`${server.url}/flaky`));
 *     yield* until(res.text());
 *     seen.push(res.status);
 *   }
 *   return [...seen, server.hits("/flaky")];
 * }));
 * console.log(statuses); // [503, 200, 200, 3]
 * ```
 * @throws `TypeError` or `RangeError` at once, naming the route and field, for a malformed script.
 */
export function createFaultServer(
  routes: Readonly<Record<string, RouteScript>>,
  options: FaultServerOptions = {},
): Operation<FaultServer> {
  const table = parseRoutes(routes);
  if (typeof options !== "object" || options === null)
    throw new TypeError(`createFaultServer(routes, options): expected an object, got ${String(options)}`);
  const wantHang = options.connectHang ?? true;

  return resource<FaultServer>(function* faultServer(provide) {
    const clock = options.clock ?? (yield* useClock());
    let starting = clock.hold?.("fault server: starting");
    const recorder = createRecorder(clock);
    const server = createServer({ requestTimeout: 0, headersTimeout: 0 });
    // Scripts decide when a connection ends; node's own real-time idle timer must not.
    server.keepAliveTimeout = 0;
    server.on("connection", (socket) => recorder.accept(socket));
    server.on("clientError", (_error, socket) => socket.destroy());
    server.on("request", (req: IncomingMessage, res: ServerResponse) => {
      const conn = recorder.connectionOf(req.socket);
      const arrivedAt = clock.now();
      const method = req.method ?? "GET";
      const path = req.url ?? "/";
      const pathname = pathOf(path);
      const match = table.next(method, pathname);
      const record = {
        method,
        path,
        headers: req.headers,
        arrivedAt,
        connectionId: conn.record.id,
        route: match?.key ?? null,
        index: match?.index ?? 0,
        body: "",
      };
      recorder.requests.push(record);
      // Bridges to the end of the body without holding through a body that arrives slowly.
      conn.activity.busy(`${method} ${path}: reading the request`)();
      req.on("error", () => {});
      res.on("error", () => {});
      req.setEncoding("utf8");
      req.on("data", (chunk: string) => {
        record.body += chunk;
      });
      req.once("end", () => {
        perform(match?.step ?? notFound(method, pathname), { req, res, conn, clock, arrivedAt });
      });
    });

    let closing = false;
    // Once released, the connect-hang listener's connections are served here like any other.
    const serve = (socket: Socket) => (closing ? socket.destroy() : server.emit("connection", socket));
    const hang = wantHang ? startConnectHang(clock, serve) : null;
    let ready: ConnectHang | null = null;
    try {
      yield* action<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen({ host: "127.0.0.1", port: 0 }, () => {
          server.off("error", reject);
          resolve();
        });
        return () => server.off("error", reject);
      }, "fault server: listening");
      const { port } = server.address() as { port: number };
      const refusedPort = yield* findRefusedPort();
      if (hang) ready = yield* hang.ready;
      const hangUrl = ready?.url ?? null;
      starting?.();
      starting = undefined;
      yield* provide({
        url: `http://127.0.0.1:${port}`,
        refusedUrl: `http://127.0.0.1:${refusedPort}`,
        get connectHangUrl(): string {
          if (hangUrl === null) throw noHang("connectHangUrl");
          return hangUrl;
        },
        releaseConnectHang() {
          if (ready === null) throw noHang("releaseConnectHang()");
          ready.release();
        },
        requests: recorder.requests,
        connections: recorder.connections,
        get openSockets() {
          return recorder.live.size;
        },
        hits: (path) => recorder.hits(path),
      });
    } finally {
      closing = true;
      starting?.();
      const closingHold = clock.hold?.("fault server: closing");
      try {
        const live = [...recorder.live];
        for (const conn of live) {
          conn.activity.dispose();
          conn.socket.destroy();
        }
        yield* action<void>((resolve) => {
          if (server.listening) server.close(() => resolve());
          else resolve();
          return () => {};
        }, "fault server: closing the listener");
        yield* until(Promise.all(live.map((c) => c.closed)));
      } finally {
        try {
          if (hang) yield* hang.stop();
        } finally {
          closingHold?.();
        }
      }
    }
  });
}
