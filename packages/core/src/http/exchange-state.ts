/**
 * The state of one exchange: what undici's callbacks (exchange-io.ts), the attempt's timer
 * (limits.ts) and the attempt itself (perform.ts) read and write. Only types: every file of the
 * exchange imports this one, and it imports none of them but the timer's shape.
 * @module
 */
import type { Dispatcher } from "undici";
import type { Outcome, Suspension } from "../kernel/operation.js";
import type { AttemptTimer } from "./limits.js";
import type { RequestPlan } from "./plan.js";

/** Where the exchange is. */
export type ExchangeStage = "connecting" | "waiting-headers" | "body" | "done" | "failed";

/** What a task waits for: `spent` waits only for the timer (a deadline already spent). */
export type ExchangeWait = "connect" | "headers" | "body" | "spent";

/** What undici hands a handler to abort, pause and resume its request (undici ≥ 7.0 and 8). */
export type ExchangeController = Pick<Dispatcher.DispatchController, "abort" | "pause" | "resume">;

/**
 * One exchange: its own undici handler (the handler API of undici 7 and 8: `onRequestStart`,
 * `onResponseStart`…), the suspension its task waits at (one object for every wait of the
 * attempt), and the attempt's timer (see limits.ts).
 */
export interface Exchange extends Suspension<void>, AttemptTimer {
  readonly kind: "suspend";
  readonly interruptible: "normal";
  description: string;
  readonly plan: RequestPlan;
  /** Replaced (never mutated: it may be the plan's) by an `http:request` listener's `setHeader`. */
  headersSent: Record<string, string>;
  /**
   * What the dispatch runs inside, set by an `http:request` listener's `dispatchWithin` (an
   * observer's async context: undici's own instrumentation reads it), else null.
   */
  dispatchScope: ((dispatch: () => void) => void) | null;
  stage: ExchangeStage;
  /** Set once the request was handed to a connected socket: from then on it may have reached the server. */
  written: boolean;
  status: number;
  headers: Record<string, string | string[]>;
  /** The response has no body by its status, method or `content-length: 0`. */
  bodyless: boolean;
  readonly chunks: Buffer[];
  bufferedBytes: number;
  receivedBytes: number;
  error: unknown;
  paused: boolean;
  waitFor: ExchangeWait;
  /** Invariant: set exactly while a task waits at this exchange. */
  resolveWait: ((outcome: Outcome<void>) => void) | null;
  readonly leaveWait: () => void;
  /** undici's controller, from the moment the request is on a socket. */
  controller: ExchangeController | null;
  abortedWith: Error | null;
  releaseSendHold: (() => void) | null;
  /** True from dispatch until the request reaches a socket, fails or is aborted. */
  waitingForSocket: boolean;

  start(): void;
  onRequestStart(controller: ExchangeController, context: unknown): void;
  onResponseStart(
    controller: ExchangeController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
  ): void;
  onResponseData(controller: ExchangeController, chunk: Buffer): void;
  onResponseEnd(controller: ExchangeController, trailers: unknown): void;
  onResponseError(controller: ExchangeController | null, err: Error): void;
  /** Takes buffered chunks, resuming the socket if it was paused. */
  take(): Buffer[];
  /** Lets the body flow from the socket (paused after the headers, and above the high water mark). */
  resumeReading(): void;
  /**
   * Stops the exchange: before it reached a socket it is dropped when its turn comes; on a socket,
   * the socket is destroyed (never pooled half-read). Holds virtual time one turn so the peer sees it.
   */
  abort(reason: Error): void;
  /** Sets what the next wait is for: `yield ex.wait("headers")`. */
  wait(what: ExchangeWait): Exchange;
}
