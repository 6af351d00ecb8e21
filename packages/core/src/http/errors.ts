/**
 * The HTTP layer's errors: one class per failure phase, each with a stable `code`.
 * @module
 */
import { isKeelError, KeelError, TimeoutError } from "../errors.js";
import { roundMs } from "../format-value.js";
import { retryableStatuses } from "../resilience/transient.js";

/**
 * The phases of an HTTP exchange that each have a timeout.
 *
 * @example
 * ```ts
 * import { type HttpPhase, HttpTimeoutError } from "@keel/core/http";
 * const advice: Record<HttpPhase, string> = {
 *   connect: "is the host up?",
 *   headers: "the server is slow to answer",
 *   body: "the body stalled",
 *   total: "raise totalMs, or the caller's deadline",
 * };
 * const e = new HttpTimeoutError({ phase: "body", timeoutMs: 100, deadline: 100, elapsedMs: 100, label: "GET /export" });
 * console.log(`${e.message}: ${advice[e.phase]}`); // GET /export: no body data within 100 ms: the body stalled
 * ```
 */
export type HttpPhase = "connect" | "headers" | "body" | "total";

const phaseCodes = {
  connect: "KEEL_HTTP_CONNECT_TIMEOUT",
  headers: "KEEL_HTTP_HEADERS_TIMEOUT",
  body: "KEEL_HTTP_BODY_TIMEOUT",
  total: "KEEL_HTTP_TOTAL_TIMEOUT",
} as const;

/**
 * The stable code of each phase's timeout.
 *
 * @example
 * ```ts
 * import { isKeelError } from "@keel/core";
 * import { HttpTimeoutError, httpTimeoutCodes } from "@keel/core/http";
 * const timeoutCodes = new Set(Object.values(httpTimeoutCodes));
 * const isHttpTimeout = (e: unknown) => isKeelError(e) && timeoutCodes.has(e.code);
 * const e = new HttpTimeoutError({ phase: "total", timeoutMs: 50, deadline: 50, elapsedMs: 50, label: "GET /" });
 * console.log(httpTimeoutCodes.headers, isHttpTimeout(e), isHttpTimeout(new Error("x"))); // KEEL_HTTP_HEADERS_TIMEOUT true false
 * ```
 */
export const httpTimeoutCodes: Readonly<Record<HttpPhase, string>> = phaseCodes;

/**
 * A phase of an HTTP exchange ran out of time: `connect` (no connection), `headers` (no response
 * headers), `body` (a gap between body chunks longer than `bodyIdleMs`), or `total`. A `TimeoutError`,
 * so retries treat it as transient.
 *
 * @example
 * ```ts
 * import { HttpTimeoutError } from "@keel/core/http";
 * const e = new HttpTimeoutError({ phase: "headers", timeoutMs: 2000, deadline: 2000, elapsedMs: 2000, label: "GET /orders" });
 * console.log(e.code, e.message); // KEEL_HTTP_HEADERS_TIMEOUT GET /orders: no response headers within 2000 ms
 * ```
 */
export class HttpTimeoutError extends TimeoutError {
  readonly phase: HttpPhase;
  constructor(init: {
    phase: HttpPhase;
    timeoutMs: number;
    deadline: number;
    elapsedMs: number;
    label: string;
  }) {
    const what = {
      connect: "no connection",
      headers: "no response headers",
      body: "no body data",
      total: "not complete",
    }[init.phase];
    super({
      ...init,
      code: phaseCodes[init.phase],
      message: `${init.label}: ${what} within ${roundMs(init.timeoutMs)} ms`,
    });
    this.name = "HttpTimeoutError";
    this.phase = init.phase;
  }
}

/**
 * A response whose status the request did not expect. Retryable statuses (408, 425, 429, 500, 502,
 * 503, 504) make it transient; `retryAfterMs` comes from `Retry-After`.
 *
 * @example
 * ```ts
 * import { HttpError } from "@keel/core/http";
 * const e = new HttpError({ method: "GET", url: "http://api/x", status: 503, headers: {}, bodyExcerpt: "busy" });
 * console.log(e.code, e.retryable); // KEEL_HTTP_STATUS true
 * ```
 */
export class HttpError extends KeelError {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[]>>;
  /** At most 2 KiB of the body, as text. */
  readonly bodyExcerpt: string;
  readonly retryAfterMs: number | undefined;
  readonly method: string;
  readonly url: string;
  readonly retryable: boolean;
  constructor(init: {
    method: string;
    url: string;
    status: number;
    headers: Record<string, string | string[]>;
    bodyExcerpt: string;
    retryAfterMs?: number;
    /** Overrides what the status says (a POST that reached the server is never retryable). */
    retryable?: boolean | undefined;
  }) {
    super("KEEL_HTTP_STATUS", `${init.method} ${init.url}: unexpected status ${init.status}`);
    this.name = "HttpError";
    this.status = init.status;
    this.headers = init.headers;
    this.bodyExcerpt = init.bodyExcerpt;
    this.retryAfterMs = init.retryAfterMs;
    this.method = init.method;
    this.url = init.url;
    this.retryable = init.retryable ?? retryableStatuses.has(init.status);
  }
}

/**
 * True for an {@link HttpError}, across duplicate package copies.
 *
 * @example
 * ```ts
 * import { run } from "@keel/core";
 * import { createHttpClient, isHttpError } from "@keel/core/http";
 * import { createServer } from "node:http";
 * const server = createServer((_, res) => { res.statusCode = 404; res.end("no such order"); }).listen(0, "127.0.0.1");
 * await new Promise((r) => server.once("listening", r));
 * const { port } = server.address() as { port: number };
 * const outcome = await run(function* () {
 *   const client = yield* createHttpClient({ baseUrl: `http://127.0.0.1:${port}` });
 *   try {
 *     return yield* client.getJson("/orders/404");
 *   } catch (e) {
 *     if (isHttpError(e)) return `${e.status} retryable=${e.retryable} ${e.bodyExcerpt}`;
 *     throw e;
 *   }
 * });
 * console.log(outcome); // 404 retryable=false no such order
 * server.close();
 * ```
 */
export function isHttpError(e: unknown): e is HttpError {
  return isKeelError(e) && e.code === "KEEL_HTTP_STATUS";
}

/**
 * A body read after the scope that made the request has ended: the unread body was discarded and its
 * socket destroyed then, so this read fails at once instead of hanging or returning a truncated body.
 *
 * @example
 * ```ts
 * import { run, scoped } from "@keel/core";
 * import { BodyReleasedError, createHttpClient } from "@keel/core/http";
 * import { createServer } from "node:http";
 * const server = createServer((_, res) => res.end("report")).listen(0, "127.0.0.1");
 * await new Promise((r) => server.once("listening", r));
 * const { port } = server.address() as { port: number };
 * const outcome = await run(function* () {
 *   const client = yield* createHttpClient({ baseUrl: `http://127.0.0.1:${port}` });
 *   const res = yield* scoped(() => client.get("/report")); // the body belongs to this inner scope
 *   try {
 *     return yield* res.text(); // read after that scope ended
 *   } catch (e) {
 *     if (e instanceof BodyReleasedError) return e.code;
 *     throw e;
 *   }
 * });
 * console.log(outcome); // KEEL_BODY_RELEASED
 * server.close();
 * ```
 */
export class BodyReleasedError extends KeelError {
  constructor(what: string) {
    super(
      "KEEL_BODY_RELEASED",
      `${what}: the response body was released when the scope that made the request ended`,
    );
    this.name = "BodyReleasedError";
  }
}

/**
 * A body read whole (`text()`, `bytes()`, `json()`, `getJson`) is larger than `maxResponseBytes`:
 * the read stops there, the rest is not read and the socket is destroyed. Not retryable: the same
 * request would get the same body.
 *
 * @example
 * ```ts
 * import { run } from "@keel/core";
 * import { createHttpClient, HttpResponseTooLargeError } from "@keel/core/http";
 * import { createServer } from "node:http";
 * const server = createServer((_, res) => res.end("x".repeat(5000))).listen(0, "127.0.0.1");
 * await new Promise((r) => server.once("listening", r));
 * const { port } = server.address() as { port: number };
 * const outcome = await run(function* () {
 *   const client = yield* createHttpClient({ baseUrl: `http://127.0.0.1:${port}`, maxResponseBytes: 1024 });
 *   try {
 *     return yield* (yield* client.get("/export")).text();
 *   } catch (e) {
 *     if (e instanceof HttpResponseTooLargeError) return `${e.code} limit ${e.limitBytes}`;
 *     throw e;
 *   }
 * });
 * console.log(outcome); // KEEL_HTTP_RESPONSE_TOO_LARGE limit 1024
 * server.close();
 * ```
 */
export class HttpResponseTooLargeError extends KeelError {
  readonly retryable = false;
  readonly limitBytes: number;
  /** The body's size when `content-length` announced it, else the bytes received when the read stopped. */
  readonly bytes: number;
  readonly announced: boolean;
  constructor(init: { label: string; limitBytes: number; bytes: number; announced: boolean }) {
    const size = init.announced ? `announces ${init.bytes} bytes` : `exceeds it after ${init.bytes} bytes`;
    super(
      "KEEL_HTTP_RESPONSE_TOO_LARGE",
      `${init.label}: the response body ${size}, over maxResponseBytes ${init.limitBytes}`,
    );
    this.name = "HttpResponseTooLargeError";
    this.limitBytes = init.limitBytes;
    this.bytes = init.bytes;
    this.announced = init.announced;
  }
}
