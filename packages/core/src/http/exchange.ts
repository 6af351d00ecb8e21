/**
 * One HTTP exchange over an undici dispatcher, as a state machine the operations wait on.
 *
 * undici's own timers are disabled (headers and body timeouts 0): every limit is a Keel timeout on
 * the runtime's clock. Aborting destroys the socket when the exchange has started on one, so a
 * half-read connection is never returned to the pool.
 *
 * An exchange is an object literal whose methods are shared functions, not a class instance. V8
 * holds the hidden classes that class instances reach by adding their fields only through live
 * instances: a full GC with no request in flight (an idle moment; the HTTP bench forces one before
 * each pass) drops them, and with them the optimized code of the whole request path, which then
 * runs cold while it is compiled again (measured: about twice the CPU per request over a pass of
 * 5,000). A literal's hidden class lives as long as the code that creates it.
 * @module
 */
import type { Outcome, Suspension } from "../kernel/operation.js";
import type { HttpPhase } from "./errors.js";
import {
  abort,
  onComplete,
  onConnect,
  onData,
  onError,
  onHeaders,
  onRequestSent,
  ready,
  resumeReading,
  start,
  take,
} from "./exchange-io.js";
import { fireTimer } from "./limits.js";
import type { RequestPlan } from "./plan.js";

/** Where the exchange is. */
export type ExchangeStage = "connecting" | "waiting-headers" | "body" | "done" | "failed";

/** What a task waits for: `spent` waits only for the timer (a deadline already spent). */
export type ExchangeWait = "connect" | "headers" | "body" | "spent";

const RESUMED: Outcome<void> = Object.freeze({ ok: true, value: undefined });

/**
 * One exchange: its own undici handler, the suspension its task waits at (one object for every wait
 * of the attempt), and the attempt's timer (see limits.ts).
 */
export interface Exchange extends Suspension<void> {
  readonly kind: "suspend";
  readonly interruptible: "normal";
  description: string;
  readonly plan: RequestPlan;
  readonly headersSent: Record<string, string>;
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
  abortFn: ((reason: Error) => void) | null;
  abortedWith: Error | null;
  resumeFn: (() => void) | null;
  releaseSendHold: (() => void) | null;
  /** True from dispatch until the request reaches a socket, fails or is aborted. */
  waitingForSocket: boolean;

  // The attempt's timer: one clock timer, armed at the nearest limit in force (limits.ts).
  /** The limit that ran out, once one has (`total` when both were due); never reset. */
  expired: HttpPhase | null;
  phase: HttpPhase | null;
  phaseAt: number;
  armedAt: number;
  cancelTimer: (() => void) | null;
  /** When the call's total began counting, and its length when this attempt enforces it (else Infinity). */
  readonly totalFrom: number;
  readonly totalMs: number;
  readonly totalAt: number;
  readonly fire: () => void;

  start(): void;
  onConnect(abort: (err?: Error) => void): void;
  onRequestSent(): void;
  onHeaders(statusCode: number, rawHeaders: Buffer[] | string[] | null, resume: () => void): boolean;
  onData(chunk: Buffer): boolean;
  onComplete(): void;
  onError(err: Error): void;
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
  /** Ends the wait in progress whatever the exchange's state: a limit ran out. */
  interrupt(): void;
}

/** A new exchange; `totalMs` is the call's total when this attempt enforces it, else Infinity. */
export function createExchange(
  plan: RequestPlan,
  headersSent: Record<string, string>,
  totalFrom: number,
  totalMs: number,
): Exchange {
  const ex: Exchange = {
    kind: "suspend",
    interruptible: "normal",
    description: "",
    plan,
    headersSent,
    stage: "connecting",
    written: false,
    status: 0,
    headers: NO_HEADERS,
    bodyless: false,
    chunks: [],
    bufferedBytes: 0,
    receivedBytes: 0,
    error: null,
    paused: false,
    waitFor: "connect",
    resolveWait: null,
    leaveWait: () => {
      ex.resolveWait = null;
    },
    abortFn: null,
    abortedWith: null,
    resumeFn: null,
    releaseSendHold: null,
    waitingForSocket: false,
    expired: null,
    phase: null,
    phaseAt: Infinity,
    armedAt: Infinity,
    cancelTimer: null,
    totalFrom,
    totalMs,
    totalAt: totalFrom + totalMs,
    fire: () => fireTimer(ex),
    start,
    onConnect,
    onRequestSent,
    onHeaders,
    onData,
    onComplete,
    onError,
    take,
    resumeReading,
    abort,
    wait,
    enter,
    interrupt,
  };
  return ex;
}

const NO_HEADERS: Record<string, string | string[]> = Object.freeze({});

function wait(this: Exchange, what: ExchangeWait): Exchange {
  this.waitFor = what;
  // Set when the wait begins: while it lasts, no byte arrives without ending it.
  this.description = describe(this);
  return this;
}

function describe(ex: Exchange): string {
  const label = ex.plan.label;
  switch (ex.waitFor) {
    case "connect":
      return `${label}: connecting`;
    case "headers":
      return `${label}: waiting for headers`;
    case "body":
      return `${label}: reading body (${ex.receivedBytes} bytes so far)`;
    case "spent":
      return `${label}: deadline spent`;
  }
}

function enter(this: Exchange, resolve: (outcome: Outcome<void>) => void): (() => void) | undefined {
  if (ready(this)) {
    resolve(RESUMED);
    return undefined;
  }
  this.resolveWait = resolve;
  return this.leaveWait;
}

function interrupt(this: Exchange): void {
  this.resolveWait?.(RESUMED);
}
