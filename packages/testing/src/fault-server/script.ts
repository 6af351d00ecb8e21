/**
 * The fault server's script language: what a route may be told to do with a request.
 * @module
 */

/**
 * Header values a script may set; numbers are sent as their decimal text.
 *
 * @example
 * ```ts
 * import { run } from "@keel/core";
 * import { createHttpClient } from "@keel/core/http";
 * import { createFaultServer, createVirtualClock, type HeaderValue } from "@keel/testing";
 * const headers: Record<string, HeaderValue> = { "x-ratelimit-remaining": 0, "set-cookie": ["a=1", "b=2"] };
 * const seen = await run(function* () {
 *   const server = yield* createFaultServer({ "/": { status: 200, headers, body: "ok" } }, { connectHang: false });
 *   const client = yield* createHttpClient({ baseUrl: server.url });
 *   const res = yield* client.get("/");
 *   yield* res.text();
 *   return [res.headers["x-ratelimit-remaining"], res.headers["set-cookie"]];
 * }, { clock: createVirtualClock() });
 * console.log(seen); // ["0", ["a=1", "b=2"]]
 * ```
 */
export type HeaderValue = string | number | readonly string[];

/**
 * The status line and headers of a behaviour that writes a response head.
 *
 * @example
 * ```ts
 * import type { ResponseHead } from "@keel/testing";
 * const head: ResponseHead = { status: 503, headers: { "x-reason": "maintenance" }, retryAfter: 2 };
 * console.log(head.status); // 503
 * ```
 */
export interface ResponseHead {
  /** The status code, 100 to 999 (default 200). */
  status?: number;
  /** Extra headers; they override the server's own (`content-type`, `content-length`, `date`). */
  headers?: Readonly<Record<string, HeaderValue>>;
  /**
   * Sets `Retry-After`: a number is delay-seconds, a `Date` is sent as an HTTP-date, a string as is.
   * The server's `Date` header is its clock's time, so an HTTP-date can be made relative to it.
   */
  retryAfter?: string | number | Date;
}

/**
 * Answers normally, after `delayMs` on the server's clock: `json` (sent with
 * `content-type: application/json`) or `body`, with `content-length`.
 *
 * @example
 * ```ts
 * import type { RespondBehaviour } from "@keel/testing";
 * const slowOk: RespondBehaviour = { status: 200, json: { ok: true }, delayMs: 250 };
 * console.log(slowOk.delayMs); // 250
 * ```
 */
export interface RespondBehaviour extends ResponseHead {
  json?: unknown;
  body?: string | Uint8Array;
  /** Time from the request's arrival to the response (default 0). */
  delayMs?: number;
}

/**
 * Never finishes the response: `"before-headers"` writes nothing at all; `"after-headers"` writes
 * the status line and headers (chunked, unless `headers` set a `content-length`), then nothing.
 *
 * @example
 * ```ts
 * import type { HangBehaviour } from "@keel/testing";
 * const script: HangBehaviour[] = [{ hang: "before-headers" }, { hang: "after-headers", status: 200 }];
 * console.log(script.length); // 2
 * ```
 */
export type HangBehaviour =
  | { hang: "before-headers" }
  | ({ hang: "after-headers"; delayMs?: number } & ResponseHead);

/**
 * Sends the head at `delayMs` (alias `headersDelayMs`) after arrival, then `count` chunks, one
 * every `everyMs`: chunk `i` (from 1) at head time + `i × everyMs`, the last one ending the response.
 * `chunk` is a string or a number of bytes (`"x"` repeated). `content-length` announces the whole
 * body; `count: Infinity` (with `everyMs > 0`) drips forever, chunked.
 *
 * @example
 * ```ts
 * import type { DripBehaviour } from "@keel/testing";
 * const slowBody: DripBehaviour = { drip: { chunk: 16, everyMs: 100, count: 10 }, headersDelayMs: 50 };
 * console.log(slowBody.drip.count); // 10
 * ```
 */
export interface DripBehaviour extends ResponseHead {
  drip: { chunk: string | number; everyMs: number; count: number };
  delayMs?: number;
  headersDelayMs?: number;
}

/**
 * Destroys the socket with a TCP RST (`ECONNRESET` at the client), after `delayMs`:
 * `"before-headers"` with nothing written; `"after-headers"` once the head has reached the client;
 * `"mid-body"` once the head and `afterBytes` body bytes have, the head announcing `totalBytes`
 * (default `afterBytes + 1024`) in `content-length`.
 *
 * @example
 * ```ts
 * import type { ResetBehaviour } from "@keel/testing";
 * const cut: ResetBehaviour = { reset: "mid-body", afterBytes: 100 };
 * console.log(cut.reset); // "mid-body"
 * ```
 */
export type ResetBehaviour =
  | { reset: "before-headers"; delayMs?: number }
  | ({ reset: "after-headers"; delayMs?: number } & ResponseHead)
  | ({ reset: "mid-body"; afterBytes: number; totalBytes?: number; delayMs?: number } & ResponseHead);

/**
 * Closes the connection normally (FIN) without writing a byte, after `delayMs`: what a server does
 * when it drops an idle keep-alive connection just as the client reuses it.
 *
 * @example
 * ```ts
 * import type { CloseBehaviour } from "@keel/testing";
 * const drop: CloseBehaviour = { close: "without-response" };
 * console.log(drop.close); // "without-response"
 * ```
 */
export interface CloseBehaviour {
  close: "without-response";
  delayMs?: number;
}

/**
 * What the server does with one request. A bare number is `{ status: n }`.
 *
 * @example
 * ```ts
 * import type { Behaviour } from "@keel/testing";
 * const busy: Behaviour = { status: 503, retryAfter: "2" };
 * const created: Behaviour = 201;
 * console.log(typeof created, "status" in busy); // number true
 * ```
 */
export type Behaviour =
  | number
  | RespondBehaviour
  | HangBehaviour
  | DripBehaviour
  | ResetBehaviour
  | CloseBehaviour;

/**
 * A route's script: one behaviour for every request, or a sequence where the n-th request to the
 * route gets the n-th behaviour and the last one repeats.
 *
 * @example
 * ```ts
 * import type { RouteScript } from "@keel/testing";
 * const flaky: RouteScript = [503, { reset: "after-headers" }, { status: 200, json: { id: 7 } }];
 * console.log(flaky.length); // 3
 * ```
 */
export type RouteScript = Behaviour | readonly Behaviour[];
