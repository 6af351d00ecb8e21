/**
 * What every HTTP client implements for the benchmark, each in its own idiom.
 * @module
 */

export type ClientId = "keel" | "undici" | "fetch";
export const clientIds: readonly ClientId[] = ["keel", "undici", "fetch"];

/** The server's reply to every request. */
export const REPLY = { ok: true, id: 42, name: "keel", tags: ["a", "b", "c"] } as const;

/** The connections per origin of Keel's client (its default) and of the plain undici Agent. */
export const CONNECTIONS = 10;

export interface Plan {
  /** `http://127.0.0.1:<port>` */
  readonly origin: string;
  readonly path: string;
  /** Requests per pass. */
  readonly n: number;
  /** Requests in flight at once: 1 is one after another. */
  readonly inFlight: number;
  /** Passes, warm-ups included; the caller drops the warm-ups. */
  readonly passes: number;
}

/** One pass: its wall time and every request's latency (ms, request start to parsed body). */
export interface Pass {
  readonly wallMs: number;
  readonly latencies: Float64Array;
}

export interface HttpPeer {
  /**
   * Runs `plan.passes` passes over one client (one pool) made once: each pass sends `plan.n` GETs of
   * the JSON resource, `plan.inFlight` workers each taking the next request when its last is parsed.
   */
  run(plan: Plan): Promise<Pass[]>;
}

/** Throws unless `body` is the server's reply, so a client that skipped parsing cannot look fast. */
export function checkReply(body: unknown): void {
  if ((body as { id?: unknown } | null)?.id !== REPLY.id) {
    throw new Error(`bench: unexpected reply ${JSON.stringify(body)}`);
  }
}

/**
 * Requests each client makes after the gc() that starts a pass, before the pass is timed. A full GC
 * with few objects alive lets V8 drop hidden classes and with them compiled code (undici's own
 * internals included); without this, every pass would time each client re-compiling, by amounts
 * that differ between clients and have nothing to do with a warm process.
 */
export const REWARM_REQUESTS = 200;
