/**
 * `createHttpClient`: one pooled undici Agent per client, requests with phased Keel timeouts,
 * retries by status, and the deadline sent downstream.
 * @module
 */
import { Agent } from "undici";
import { KeelError } from "../errors.js";
import { until } from "../kernel/interop.js";
import type { Operation } from "../kernel/operation.js";
import { resource } from "../kernel/resource.js";
import type { RetryPolicy } from "../resilience/retry.js";
import { useClock } from "../time/deadline.js";
import { ConnectionBook } from "./connections.js";
import { performRequest } from "./perform.js";
import { type ClientState, checkClientOptions, planFor } from "./plan.js";
import type { HttpResponse } from "./response.js";

/**
 * Per-phase limits, each on the runtime's clock and clamped to the effective deadline.
 *
 * @example
 * ```ts
 * import { run } from "@keel/core";
 * import { createHttpClient, HttpTimeoutError, type HttpTimeouts } from "@keel/core/http";
 * import { createFaultServer, createVirtualClock } from "@keel/testing";
 * const clock = createVirtualClock();
 * const limits: HttpTimeouts = { connectMs: 1000, headersMs: 300, bodyIdleMs: 1000, totalMs: 5000 };
 * const outcome = await run(function* () {
 *   const server = yield* createFaultServer({ "/slow": { hang: "before-headers" } }, { connectHang: false });
 *   const client = yield* createHttpClient({ baseUrl: server.url, timeouts: limits, retry: false });
 *   try {
 *     yield* client.get("/slow");
 *     return "answered";
 *   } catch (e) {
 *     if (e instanceof HttpTimeoutError) return `${e.phase} timeout at ${clock.now()} ms`;
 *     throw e;
 *   }
 * }, { clock });
 * console.log(outcome); // "headers timeout at 300 ms"
 * ```
 */
export interface HttpTimeouts {
  /** Until the request is on a connected socket (queueing for a pooled connection included). */
  connectMs?: number;
  /** From then until the response headers. */
  headersMs?: number;
  /** The longest gap between two body chunks. */
  bodyIdleMs?: number;
  /** The whole call: connect, headers, body, parse, and every retry. */
  totalMs?: number;
}

/**
 * Options of one request.
 *
 * @example
 * ```ts
 * import { run } from "@keel/core";
 * import { createHttpClient, type RequestOptions } from "@keel/core/http";
 * import { createFaultServer, createVirtualClock } from "@keel/testing";
 * const order: RequestOptions = {
 *   method: "POST",
 *   query: { dryRun: false },
 *   json: { sku: "A-1", qty: 2 },
 *   idempotencyKey: "order-7f3a", // the same on every attempt, so the POST may be retried
 *   timeouts: { headersMs: 500 },
 *   retry: { attempts: 3 },
 * };
 * const seen = await run(function* () {
 *   const routes = { "POST /orders": [503, { status: 201, json: { id: 7 } }] };
 *   const server = yield* createFaultServer(routes, { connectHang: false });
 *   const client = yield* createHttpClient({ baseUrl: server.url });
 *   const res = yield* client.request("/orders", order);
 *   return { status: res.status, body: yield* res.json(), attempts: server.hits("POST /orders") };
 * }, { clock: createVirtualClock() });
 * console.log(seen); // { status: 201, body: { id: 7 }, attempts: 2 }
 * ```
 */
export interface RequestOptions {
  method?: string;
  headers?: Record<string, string>;
  query?: Record<string, string | number | boolean | undefined>;
  body?: string | Uint8Array;
  /** Sent as JSON with `content-type: application/json`; not together with `body`. */
  json?: unknown;
  timeouts?: HttpTimeouts;
  retry?: RetryPolicy | false;
  /** Sent as `Idempotency-Key` (the same on every attempt); makes POST/PATCH retryable. */
  idempotencyKey?: string;
  /** Which statuses are a success (default: below 400); `false` accepts every status. */
  expect?: ((status: number) => boolean) | false;
}

/**
 * Options of {@link createHttpClient}.
 *
 * @example
 * ```ts
 * import { run, timeout } from "@keel/core";
 * import { createHttpClient, type HttpClientOptions } from "@keel/core/http";
 * import { createFaultServer, createVirtualClock } from "@keel/testing";
 * const seen = await run(function* () {
 *   const server = yield* createFaultServer({ "/": { status: 200, json: { ok: true } } }, { connectHang: false });
 *   const options: HttpClientOptions = {
 *     baseUrl: server.url,
 *     headers: { "user-agent": "billing/1.4" },
 *     connections: 2,
 *     timeouts: { connectMs: 1000, headersMs: 2000, totalMs: 5000 },
 *     retry: { attempts: 2 },
 *     deadlineHeader: "x-deadline-ms",
 *   };
 *   const client = yield* createHttpClient(options);
 *   yield* timeout(800, () => client.getJson("/"));
 *   const { headers } = server.requests[0]!;
 *   return [headers["user-agent"], headers["x-deadline-ms"]];
 * }, { clock: createVirtualClock() });
 * console.log(seen); // ["billing/1.4", "800"]
 * ```
 */
export interface HttpClientOptions {
  baseUrl?: string;
  headers?: Record<string, string>;
  /** Connections per origin (default 10). */
  connections?: number;
  /** Reuse connections (default true). */
  keepAlive?: boolean;
  timeouts?: HttpTimeouts;
  /** Default: up to 3 attempts on transient failures, with jittered exponential backoff. */
  retry?: RetryPolicy | false;
  /** A header that carries the remaining deadline in ms downstream (default: none). */
  deadlineHeader?: string | false;
}

/**
 * An HTTP client bound to the scope that created it.
 *
 * @example
 * ```ts
 * import { run } from "@keel/core";
 * import { createHttpClient, type HttpClient } from "@keel/core/http";
 * import { createServer } from "node:http";
 * const server = createServer((req, res) => res.end(`${req.method} ${req.url}`)).listen(0, "127.0.0.1");
 * await new Promise((r) => server.once("listening", r));
 * const { port } = server.address() as { port: number };
 * // Calls take the client as a parameter; the scope that created it owns its pool.
 * function* ping(client: HttpClient, path: string) {
 *   const res = yield* client.get(path, { query: { v: 2 } });
 *   return `${res.status} ${yield* res.text()}`;
 * }
 * const replies = await run(function* () {
 *   const client = yield* createHttpClient({ baseUrl: `http://127.0.0.1:${port}` });
 *   return [yield* ping(client, "/a"), yield* ping(client, "/b")];
 * });
 * console.log(replies); // ["200 GET /a?v=2", "200 GET /b?v=2"]
 * server.close();
 * ```
 */
export interface HttpClient {
  request(path: string, options?: RequestOptions): Operation<HttpResponse>;
  get(path: string, options?: Omit<RequestOptions, "method">): Operation<HttpResponse>;
  post(path: string, options?: Omit<RequestOptions, "method">): Operation<HttpResponse>;
  put(path: string, options?: Omit<RequestOptions, "method">): Operation<HttpResponse>;
  patch(path: string, options?: Omit<RequestOptions, "method">): Operation<HttpResponse>;
  delete(path: string, options?: Omit<RequestOptions, "method">): Operation<HttpResponse>;
  /** Request, check for 2xx, read and parse the JSON body: one budget, retried as one. */
  getJson<T = unknown>(path: string, options?: Omit<RequestOptions, "method" | "expect">): Operation<T>;
}

/**
 * Creates an HTTP client: a resource whose connection pool closes when the calling scope ends.
 *
 * Every limit is a Keel timeout on the runtime's clock (virtual in tests), clamped to the effective
 * deadline: a call whose deadline is spent opens no socket. Cancelling at any phase aborts the
 * request and destroys its socket. Transient failures are retried (statuses 408, 425, 429, 500, 502,
 * 503, 504 and connection errors, honouring `Retry-After`); POST and PATCH only when the request
 * provably never reached the server, or with an `idempotencyKey`. Other 4xx fail at once with
 * `HttpError`.
 *
 * **Cancellation**: every request is a suspension point described in the task tree
 * (`GET /orders: waiting for headers`); a response body belongs to the scope that made the request.
 *
 * @example
 * ```ts
 * import { run } from "@keel/core";
 * import { createHttpClient } from "@keel/core/http";
 * import { createServer } from "node:http";
 * const server = createServer((_, res) => res.end('{"ok":true}')).listen(0, "127.0.0.1");
 * await new Promise((r) => server.once("listening", r));
 * const { port } = server.address() as { port: number };
 * const body = await run(function* () {
 *   const client = yield* createHttpClient({ baseUrl: `http://127.0.0.1:${port}`, timeouts: { totalMs: 2000 } });
 *   return yield* client.getJson<{ ok: boolean }>("/health");
 * });
 * console.log(body); // { ok: true }
 * server.close();
 * ```
 * @throws `TypeError` for an option of the wrong type (`options` itself, `baseUrl`, `headers`,
 * `retry`, `keepAlive`, `deadlineHeader`); `RangeError` for bad timeouts, `connections` or retry
 * counts. Thrown at the call; a request's own options are checked when it is made.
 */
export function createHttpClient(options: HttpClientOptions = {}): Operation<HttpClient> {
  const base = checkClientOptions(options);
  return resource<HttpClient>(function* httpClient(provide) {
    const clock = yield* useClock();
    const connections = new ConnectionBook(clock);
    const agent = new Agent({
      connections: options.connections ?? 10,
      pipelining: 1,
      connect: connections.connector(),
      headersTimeout: 0,
      bodyTimeout: 0,
    });
    const state: ClientState = { ...base, agent, connections, clock, targets: new Map() };
    let closed = false;
    const call = (
      path: string,
      opts: RequestOptions,
      method: string | undefined,
      mode: "response" | "json",
    ) => {
      const plan = planFor(state, path, opts, method, mode);
      if (closed)
        throw new KeelError("KEEL_CLIENT_CLOSED", "http client: used after the scope that created it ended");
      return performRequest(plan);
    };
    const verb =
      (method: string) =>
      (path: string, opts: Omit<RequestOptions, "method"> = {}) =>
        call(path, opts, method, "response") as Operation<HttpResponse>;
    const client: HttpClient = {
      request: (path, opts = {}) => call(path, opts, undefined, "response") as Operation<HttpResponse>,
      get: verb("GET"),
      post: verb("POST"),
      put: verb("PUT"),
      patch: verb("PATCH"),
      delete: verb("DELETE"),
      getJson: <T>(path: string, opts: Omit<RequestOptions, "method" | "expect"> = {}) =>
        call(path, opts, "GET", "json") as Operation<T>,
    };
    try {
      yield* provide(client);
    } finally {
      closed = true;
      // Started synchronously, so the sockets close even if this cleanup can no longer suspend.
      const release = clock.hold?.("http client: closing the pool");
      connections.destroyAll();
      const destroyed = agent.destroy().catch(() => {});
      if (release) destroyed.then(() => setImmediate(release));
      yield* until(destroyed);
    }
  });
}
