/**
 * `createHttpClient`: one pooled undici Agent per client, requests with phased Keel timeouts,
 * retries by status, and the deadline sent downstream.
 * @module
 */

import { Agent } from "undici";
import { KeelError } from "../errors.js";
import { hostTimers } from "../kernel/host.js";
import { until } from "../kernel/interop.js";
import type { NotAPromise } from "../kernel/not-a-promise.js";
import type { Operation } from "../kernel/operation.js";
import { resource } from "../kernel/resource.js";
import { useClock } from "../time/deadline.js";
import { ConnectionBook } from "./connections.js";
import type { HttpClientOptions, RequestOptions } from "./options.js";
import { performRequest } from "./perform.js";
import { type ClientState, checkClientOptions, planFor } from "./plan.js";
import type { HttpResponse } from "./response.js";
import { type HttpClientStats, statsOf } from "./stats.js";

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
  request(path: string, options?: RequestOptions): Operation<HttpResponse> & NotAPromise;
  get(path: string, options?: Omit<RequestOptions, "method">): Operation<HttpResponse> & NotAPromise;
  post(path: string, options?: Omit<RequestOptions, "method">): Operation<HttpResponse> & NotAPromise;
  put(path: string, options?: Omit<RequestOptions, "method">): Operation<HttpResponse> & NotAPromise;
  patch(path: string, options?: Omit<RequestOptions, "method">): Operation<HttpResponse> & NotAPromise;
  delete(path: string, options?: Omit<RequestOptions, "method">): Operation<HttpResponse> & NotAPromise;
  /** Request, check for 2xx, read and parse the JSON body: one budget, retried as one. */
  getJson<T = unknown>(
    path: string,
    options?: Omit<RequestOptions, "method" | "expect">,
  ): Operation<T> & NotAPromise;
  /** The pools' numbers now (connections open and free, requests running, pending and queued). */
  stats(): HttpClientStats;
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
    const own = options.dispatcher === undefined;
    const agent =
      options.dispatcher ??
      new Agent({
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
        call(path, opts, method, "response") as Operation<HttpResponse> & NotAPromise;
    const client: HttpClient = {
      request: (path, opts = {}) =>
        call(path, opts, undefined, "response") as Operation<HttpResponse> & NotAPromise,
      get: verb("GET"),
      post: verb("POST"),
      put: verb("PUT"),
      patch: verb("PATCH"),
      delete: verb("DELETE"),
      getJson: <T>(path: string, opts: Omit<RequestOptions, "method" | "expect"> = {}) =>
        call(path, opts, "GET", "json") as Operation<T> & NotAPromise,
      stats: () => statsOf(agent),
    };
    try {
      yield* provide(client);
    } finally {
      closed = true;
      // Started synchronously, so the sockets close even if this cleanup can no longer suspend.
      const release = clock.hold?.("http client: closing the pool");
      // A dispatcher of the user's is theirs to close; every request of this client has ended.
      const destroyed = own ? agent.destroy().catch(() => {}) : Promise.resolve();
      // After undici's own teardown: what it lost track of (see connections.ts) closes too.
      connections.destroyAll();
      if (release) destroyed.then(() => hostTimers.setImmediate(release));
      yield* until(destroyed);
    }
  });
}
