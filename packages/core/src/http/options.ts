/**
 * The options of the client and of its requests: the types the plan and the client both read, kept
 * apart so the folder reads top-down (no file imports one that imports it).
 * @module
 */
import type { Dispatcher } from "undici";
import type { Operation } from "../kernel/operation.js";
import type { RetryPolicy } from "../resilience/retry.js";

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
  /** Replaces the client's `maxResponseBytes` for this request. */
  maxResponseBytes?: number;
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
  /**
   * The largest body read whole (`text()`, `bytes()`, `json()`, `getJson`), in bytes as received
   * (default 64 MiB; `Infinity`: no limit). `chunks()` is not limited: it holds one chunk at a time.
   */
  maxResponseBytes?: number;
  /**
   * An undici dispatcher of your own (a `ProxyAgent`, an `Agent` with TLS `connect` options, a
   * `MockAgent`, `agent.compose(...)`), instead of the client's own Agent. You keep it, and close
   * it: the client's end does not. The client's `connections` do not apply to it, and neither do
   * its connection books (see the HTTP guide, "Your own dispatcher").
   */
  dispatcher?: Dispatcher;
  /** Wraps every attempt, the client's retries included: a rate limiter, a breaker, logging. */
  around?: HttpAttemptHook;
}

/**
 * What {@link HttpAttemptHook} learns about the attempt it wraps.
 *
 * @example
 * ```ts
 * import { constant, run } from "@keel/core";
 * import { createHttpClient, type HttpAttemptInfo } from "@keel/core/http";
 * import { createServer } from "node:http";
 * let calls = 0;
 * const server = createServer((_, res) => {
 *   res.statusCode = ++calls === 1 ? 503 : 200;
 *   res.end("{}");
 * }).listen(0, "127.0.0.1");
 * await new Promise((r) => server.once("listening", r));
 * const { port } = server.address() as { port: number };
 * const seen: string[] = [];
 * await run(function* () {
 *   const client = yield* createHttpClient({
 *     baseUrl: `http://127.0.0.1:${port}`,
 *     retry: { attempts: 2, backoff: constant(0) },
 *     around: (attempt, info: HttpAttemptInfo) => {
 *       seen.push(`${info.label} #${info.attempt}`);
 *       return attempt;
 *     },
 *   });
 *   yield* client.getJson("/orders");
 * });
 * console.log(seen); // ["GET /orders #1", "GET /orders #2"]
 * server.close();
 * ```
 */
export interface HttpAttemptInfo {
  /** 1 for the first attempt of a call, 2 for its first retry… */
  readonly attempt: number;
  readonly method: string;
  readonly url: string;
  /** `GET /orders?page=2`: the method, path and query. */
  readonly label: string;
}

/**
 * Runs one attempt: `attempt` is the request (for `getJson`, with its body read and parsed), to run
 * once with `yield*`, or not at all (then what the hook throws is the attempt's failure, which the
 * client's retry judges like any other). It runs inside the attempt's limits (`perAttemptMs`,
 * `totalMs`, the caller's deadline).
 *
 * @example
 * ```ts
 * import { createCircuitBreaker, createRateLimiter, run } from "@keel/core";
 * import { createHttpClient, type HttpAttemptHook } from "@keel/core/http";
 * import { createServer } from "node:http";
 * const server = createServer((_, res) => res.end('{"ok":true}')).listen(0, "127.0.0.1");
 * await new Promise((r) => server.once("listening", r));
 * const { port } = server.address() as { port: number };
 * const limiter = createRateLimiter({ perSecond: 50, burst: 5 });
 * const breaker = createCircuitBreaker({ name: "orders", failureThreshold: 5, halfOpenAfterMs: 10_000 });
 * // Every attempt, retries included, takes a token and goes through the breaker.
 * const around: HttpAttemptHook = function* (attempt) {
 *   yield* limiter.take();
 *   return yield* breaker.run(attempt);
 * };
 * const body = await run(function* () {
 *   const client = yield* createHttpClient({ baseUrl: `http://127.0.0.1:${port}`, around });
 *   return yield* client.getJson("/orders/7");
 * });
 * console.log(body, breaker.state); // { ok: true } closed
 * server.close();
 * ```
 */
export type HttpAttemptHook = <T>(attempt: Operation<T>, info: HttpAttemptInfo) => Operation<T>;
