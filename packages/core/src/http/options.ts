/**
 * The options of the client and of its requests: the types the plan and the client both read, kept
 * apart so the folder reads top-down (no file imports one that imports it).
 * @module
 */
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
}
