/**
 * One HTTP exchange over an undici dispatcher, as a state machine the operations wait on.
 *
 * undici's own timers are disabled (headers and body timeouts 0): every limit is a Keel timeout on
 * the runtime's clock. Aborting destroys the socket when the exchange has started on one, so a
 * half-read connection is never returned to the pool.
 * @module
 */
import type { Dispatcher } from "undici";
import type { Clock } from "../kernel/clock.js";
import { type Operation, suspension } from "../kernel/operation.js";
import type { ConnectionBook } from "./connections.js";

/** Where the exchange is. */
export type ExchangeStage = "connecting" | "waiting-headers" | "body" | "done" | "failed";

/** Event-loop turns a dispatched request keeps virtual time from jumping (see `start`). */
const DISPATCH_HOLD_TURNS = 4;

function afterTurns(turns: number, fn: () => void): void {
  if (turns <= 0) fn();
  else setImmediate(() => afterTurns(turns - 1, fn));
}

/** Pause reading above this many buffered bytes (backpressure on the socket). */
const HIGH_WATER_BYTES = 256 * 1024;

export interface ExchangeInit {
  readonly dispatcher: Dispatcher;
  readonly origin: string;
  readonly path: string;
  readonly method: string;
  readonly headers: Record<string, string>;
  readonly body: string | Uint8Array | null;
  readonly reset: boolean;
  readonly clock: Clock;
  /** The key the client's clock holds use (the origin as `host:port`). */
  readonly holdKey: string;
  readonly connections: ConnectionBook;
  /** Keep the body on the socket until it is read (a response handed to the caller). */
  readonly holdBody: boolean;
}

export class Exchange {
  stage: ExchangeStage = "connecting";
  /** Set once the request was handed to a connected socket: from then on it may have reached the server. */
  written = false;
  status = 0;
  headers: Record<string, string | string[]> = {};
  readonly chunks: Buffer[] = [];
  bufferedBytes = 0;
  receivedBytes = 0;
  error: unknown = null;
  /** Wakes whoever waits for the next change of state. */
  waiter: (() => void) | null = null;
  private abortFn: ((reason: Error) => void) | null = null;
  private abortedWith: Error | null = null;
  private resumeFn: (() => void) | null = null;
  paused = false;
  private releaseSendHold: (() => void) | null = null;
  /** True from dispatch until the request reaches a socket, fails or is aborted. */
  private waitingForSocket = false;

  constructor(readonly init: ExchangeInit) {}

  start(): void {
    const { dispatcher, origin, path, method, headers, body, reset, clock, holdKey } = this.init;
    // undici may hand the request to a socket a few event-loop turns after dispatch (a pooled
    // connection frees itself asynchronously): hold virtual time for those turns, so autojump does
    // not fire a timer meanwhile. A request still waiting after that is queued behind busy sockets,
    // whose servers hold time themselves while they work.
    this.waitingForSocket = true;
    this.init.connections.waitStart(holdKey);
    const releaseDispatchHold = clock.hold?.(`${method} ${path}: dispatching`, holdKey);
    if (releaseDispatchHold) afterTurns(DISPATCH_HOLD_TURNS, releaseDispatchHold);
    // The exchange is its own undici handler (methods on the prototype: no closures per request).
    dispatcher.dispatch(
      { origin, path, method, headers, body, reset, headersTimeout: 0, bodyTimeout: 0 },
      this as unknown as Dispatcher.DispatchHandler,
    );
  }

  /** undici: the request is about to be written to a connected socket. */
  onConnect(abort: (err?: Error) => void): void {
    this.stopWaiting(false);
    this.abortFn = abort as (reason: Error) => void;
    // Aborted while it waited for a connection: throwing here (rather than calling `abort`)
    // makes undici drop the request and keep the fresh socket for the next one in the queue.
    if (this.abortedWith) throw this.abortedWith;
    this.written = true;
    this.stage = "waiting-headers";
    // The request is being written: hold virtual time until it has reached the server.
    const { clock, method, path, holdKey } = this.init;
    this.releaseSendHold = clock.hold?.(`${method} ${path}: sending`, holdKey) ?? null;
    this.wake();
  }

  /** undici: the whole request has been written. */
  onRequestSent(): void {
    this.releaseHoldSoon();
  }

  /** undici: the response head arrived. */
  onHeaders(statusCode: number, rawHeaders: Buffer[] | string[] | null, resume: () => void): boolean {
    this.releaseHoldSoon();
    this.status = statusCode;
    this.headers = parseRawHeaders(rawHeaders);
    this.resumeFn = resume;
    this.stage = "body";
    this.wake();
    // The body stays on the socket until someone reads it: a body nobody reads is discarded with
    // its socket when the owning scope ends, never pooled. An empty one completes now.
    const empty =
      this.init.method === "HEAD" ||
      statusCode === 204 ||
      statusCode === 304 ||
      this.headers["content-length"] === "0";
    this.paused = this.init.holdBody && !empty;
    return !this.paused;
  }

  /** undici: a body chunk. */
  onData(chunk: Buffer): boolean {
    this.chunks.push(chunk);
    this.bufferedBytes += chunk.length;
    this.receivedBytes += chunk.length;
    this.wake();
    if (this.bufferedBytes > HIGH_WATER_BYTES) {
      this.paused = true;
      return false;
    }
    return true;
  }

  /** undici: the body ended. */
  onComplete(): void {
    this.stage = "done";
    this.wake();
  }

  /** undici: the exchange failed (or was aborted). */
  onError(err: Error): void {
    this.stopWaiting(false);
    this.releaseHoldSoon();
    if (this.stage === "done") return;
    this.error = this.abortedWith ?? err;
    this.stage = "failed";
    this.wake();
  }

  /** Takes buffered chunks, resuming the socket if it was paused. */
  take(): Buffer[] {
    const out = this.chunks.splice(0);
    this.bufferedBytes = 0;
    this.resumeReading();
    return out;
  }

  /** Lets the body flow from the socket (paused after the headers, and above the high water mark). */
  resumeReading(): void {
    if (!this.paused) return;
    this.paused = false;
    this.resumeFn?.();
  }

  private stopWaiting(gaveUp: boolean): void {
    if (!this.waitingForSocket) return;
    this.waitingForSocket = false;
    this.init.connections.waitEnd(this.init.holdKey, gaveUp);
  }

  /**
   * Stops the exchange: before it reached a socket it is dropped when its turn comes; on a socket,
   * the socket is destroyed (never pooled half-read). Holds virtual time one turn so the peer sees it.
   */
  abort(reason: Error): void {
    if (this.stage === "done" || this.stage === "failed") return;
    this.abortedWith = reason;
    this.error = reason;
    this.stage = "failed";
    this.stopWaiting(true);
    const release = this.init.clock.hold?.(
      `${this.init.method} ${this.init.path}: closing`,
      this.init.holdKey,
    );
    try {
      this.abortFn?.(reason);
    } finally {
      if (release) setImmediate(release);
      this.releaseHoldSoon();
    }
  }

  get settled(): boolean {
    return this.stage === "done" || this.stage === "failed";
  }

  private releaseHoldSoon(): void {
    const r = this.releaseSendHold;
    this.releaseSendHold = null;
    if (r) setImmediate(r);
  }

  private wake(): void {
    const w = this.waiter;
    if (w) w();
  }
}

function parseRawHeaders(raw: Buffer[] | string[] | null): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  if (!raw) return out;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const k = raw[i]!.toString().toLowerCase();
    const v = raw[i + 1]!.toString();
    const prev = out[k];
    out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return out;
}

/**
 * Waits (a suspension point) until `ready()` holds for the exchange; `description` is read when the
 * task tree is printed, so it can report progress.
 */
export function waitOnExchange(
  ex: Exchange,
  ready: () => boolean,
  description: () => string,
): Operation<void> {
  return suspension<void>({
    kind: "suspend",
    get description() {
      return description();
    },
    interruptible: "normal",
    enter(resolve) {
      if (ready()) {
        resolve({ ok: true, value: undefined });
        return undefined;
      }
      ex.waiter = () => {
        if (ready()) resolve({ ok: true, value: undefined });
      };
      return () => {
        ex.waiter = null;
      };
    },
  });
}
