/**
 * The client's pool statistics: undici's per-origin numbers, in one shape whether the origin is
 * served by a Pool (several connections) or a single Client (`connections: 1`).
 * @module
 */
import type { Dispatcher } from "undici";

/**
 * The connection pool of one origin, or of all of them summed.
 *
 * @example
 * ```ts
 * import { run } from "@keel/core";
 * import { createHttpClient, type HttpPoolStats } from "@keel/core/http";
 * import { createServer } from "node:http";
 * const server = createServer((_, res) => res.end("ok")).listen(0, "127.0.0.1");
 * await new Promise((r) => server.once("listening", r));
 * const { port } = server.address() as { port: number };
 * const stats: HttpPoolStats = await run(function* () {
 *   const client = yield* createHttpClient({ baseUrl: `http://127.0.0.1:${port}` });
 *   yield* (yield* client.get("/")).text();
 *   return client.stats();
 * });
 * console.log(stats.connected, stats.running, stats.size); // 1 0 0
 * server.close();
 * ```
 */
export interface HttpPoolStats {
  /** Open connections. */
  readonly connected: number;
  /** Open connections with no request on them (undici counts one free a turn after its response ends). */
  readonly free: number;
  /** Requests handed to a connection's queue, not yet written. */
  readonly pending: number;
  /** Requests waiting in the pool for a connection to take them. */
  readonly queued: number;
  /** Requests written, whose response is in progress. */
  readonly running: number;
  /** Every request the pool holds: running, pending and queued. */
  readonly size: number;
}

/**
 * The client's pools: summed over origins, and per origin (`http://host:port`).
 *
 * @example
 * ```ts
 * import { run } from "@keel/core";
 * import { createHttpClient, type HttpClientStats } from "@keel/core/http";
 * import { createServer } from "node:http";
 * const server = createServer((_, res) => res.end("ok")).listen(0, "127.0.0.1");
 * await new Promise((r) => server.once("listening", r));
 * const origin = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
 * const stats: HttpClientStats = await run(function* () {
 *   const client = yield* createHttpClient({ baseUrl: origin });
 *   yield* (yield* client.get("/")).text();
 *   return client.stats();
 * });
 * console.log(Object.keys(stats.origins).length, stats.origins[origin]?.connected); // 1 1
 * server.close();
 * ```
 */
export interface HttpClientStats extends HttpPoolStats {
  readonly origins: Readonly<Record<string, HttpPoolStats>>;
}

type UndiciStats = {
  connected: number | boolean;
  free?: number;
  pending: number;
  queued?: number;
  running: number;
  size: number;
};

/** The stats of `dispatcher` (all zeros for a dispatcher that keeps none, such as a MockAgent). */
export function statsOf(dispatcher: Dispatcher): HttpClientStats {
  const raw = (dispatcher as { stats?: Record<string, UndiciStats> }).stats;
  const origins: Record<string, HttpPoolStats> = {};
  const sum = { connected: 0, free: 0, pending: 0, queued: 0, running: 0, size: 0 };
  for (const [origin, s] of Object.entries(raw ?? {})) {
    if (typeof s !== "object" || s === null) continue;
    const connected = typeof s.connected === "boolean" ? Number(s.connected) : s.connected;
    const one: HttpPoolStats = {
      connected,
      // A single Client is free when it is connected and nothing runs or waits on it.
      free: s.free ?? (connected > 0 && s.running === 0 && s.pending === 0 ? 1 : 0),
      pending: s.pending,
      queued: s.queued ?? 0,
      running: s.running,
      size: s.size,
    };
    origins[origin] = one;
    for (const k of Object.keys(sum) as (keyof HttpPoolStats)[]) sum[k] += one[k];
  }
  return { ...sum, origins };
}
