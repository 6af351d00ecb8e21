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
import type { Outcome, WaitDetail } from "../kernel/operation.js";
import {
  abort,
  onRequestStart,
  onResponseData,
  onResponseEnd,
  onResponseError,
  onResponseStart,
  ready,
  resumeReading,
  start,
  take,
} from "./exchange-io.js";
import type { Exchange, ExchangeWait } from "./exchange-state.js";
import { fireTimer } from "./limits.js";
import type { RequestPlan } from "./plan.js";

const RESUMED: Outcome<void> = Object.freeze({ ok: true, value: undefined });

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
    dispatchScope: null,
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
    controller: null,
    abortedWith: null,
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
    onRequestStart,
    onResponseStart,
    onResponseData,
    onResponseEnd,
    onResponseError,
    take,
    resumeReading,
    abort,
    wait,
    enter,
    interrupt,
    waitDetail,
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

function waitDetail(this: Exchange): WaitDetail {
  return { kind: "http", method: this.plan.method, path: this.plan.path, phase: this.waitFor };
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
