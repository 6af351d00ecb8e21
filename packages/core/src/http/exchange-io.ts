/**
 * The undici side of an exchange: the handler methods undici calls as the request reaches a socket
 * and the response arrives, and the wake-up of the task waiting on it.
 * @module
 */
import type { Dispatcher } from "undici";
import { hostTimers } from "../kernel/host.js";
import type { Outcome } from "../kernel/operation.js";
import type { Exchange, ExchangeController } from "./exchange-state.js";

/** Event-loop turns a dispatched request keeps virtual time from jumping (see `start`). */
const DISPATCH_HOLD_TURNS = 4;

function afterTurns(turns: number, fn: () => void): void {
  if (turns <= 0) fn();
  else hostTimers.setImmediate(() => afterTurns(turns - 1, fn));
}

/** Pause reading above this many buffered bytes (backpressure on the socket). */
const HIGH_WATER_BYTES = 256 * 1024;

const RESUMED: Outcome<void> = Object.freeze({ ok: true, value: undefined });

export function start(this: Exchange): void {
  const { agent, origin, path, method, body, keepAlive, clock, holdKey } = this.plan;
  // undici may hand the request to a socket a few event-loop turns after dispatch (a pooled
  // connection frees itself asynchronously): hold virtual time for those turns, so autojump does
  // not fire a timer meanwhile. A request still waiting after that is queued behind busy sockets,
  // whose servers hold time themselves while they work.
  this.waitingForSocket = true;
  this.plan.connections.waitStart(holdKey);
  const releaseDispatchHold = clock.hold?.(`${method} ${path}: dispatching`, holdKey);
  if (releaseDispatchHold) afterTurns(DISPATCH_HOLD_TURNS, releaseDispatchHold);
  const request = {
    origin,
    path,
    method,
    headers: this.headersSent,
    body,
    reset: !keepAlive,
    headersTimeout: 0,
    bodyTimeout: 0,
  };
  const handler = this as unknown as Dispatcher.DispatchHandler;
  // Inside an observer's scope when one asked (see `dispatchScope`): undici publishes the request's
  // creation synchronously in `dispatch`, to subscribers that read the async context there.
  if (this.dispatchScope) this.dispatchScope(() => agent.dispatch(request, handler));
  else agent.dispatch(request, handler);
}

/**
 * undici: the request is about to be written to a connected socket. Keel sends only string and
 * byte bodies, which undici writes before this call's caller returns; so the send hold lasts one
 * turn past this call (undici 7's adapter for this handler API drops `onRequestSent`).
 */
export function onRequestStart(this: Exchange, controller: ExchangeController): void {
  stopWaiting(this, false);
  this.controller = controller;
  // Aborted while it waited for a connection: throwing here (rather than calling `abort`)
  // makes undici drop the request and keep the fresh socket for the next one in the queue.
  if (this.abortedWith) throw this.abortedWith;
  this.written = true;
  this.stage = "waiting-headers";
  // The request is being written: hold virtual time until it has reached the server.
  const { clock, method, path, holdKey } = this.plan;
  this.releaseSendHold = clock.hold?.(`${method} ${path}: sending`, holdKey) ?? null;
  releaseHoldSoon(this);
  wake(this);
}

/** undici: the response head arrived (header names lowercased, a repeated one as an array). */
export function onResponseStart(
  this: Exchange,
  controller: ExchangeController,
  statusCode: number,
  headers: Record<string, string | string[] | undefined>,
): void {
  releaseHoldSoon(this);
  this.status = statusCode;
  this.headers = headers as Record<string, string | string[]>;
  this.stage = "body";
  wake(this);
  // The body stays on the socket until someone reads it: a body nobody reads is discarded with
  // its socket when the owning scope ends, never pooled. An empty one completes now. getJson reads
  // the body at once.
  this.bodyless =
    this.plan.method === "HEAD" ||
    statusCode === 204 ||
    statusCode === 304 ||
    headers["content-length"] === "0";
  this.paused = this.plan.mode === "response" && !this.bodyless;
  if (this.paused) controller.pause();
}

/** undici: a body chunk. */
export function onResponseData(this: Exchange, controller: ExchangeController, chunk: Buffer): void {
  this.chunks.push(chunk);
  this.bufferedBytes += chunk.length;
  this.receivedBytes += chunk.length;
  wake(this);
  if (this.bufferedBytes > HIGH_WATER_BYTES && !this.paused) {
    this.paused = true;
    controller.pause();
  }
}

/** undici: the body ended. */
export function onResponseEnd(this: Exchange): void {
  this.stage = "done";
  wake(this);
}

/** undici: the exchange failed (or was aborted). */
export function onResponseError(this: Exchange, _controller: unknown, err: Error): void {
  stopWaiting(this, false);
  releaseHoldSoon(this);
  if (this.stage === "done") return;
  this.error = this.abortedWith ?? err;
  this.stage = "failed";
  wake(this);
}

export function take(this: Exchange): Buffer[] {
  const out = this.chunks.splice(0);
  this.bufferedBytes = 0;
  this.resumeReading();
  return out;
}

export function resumeReading(this: Exchange): void {
  if (!this.paused) return;
  this.paused = false;
  this.controller?.resume();
}

export function abort(this: Exchange, reason: Error): void {
  if (this.stage === "done" || this.stage === "failed") return;
  this.abortedWith = reason;
  this.error = reason;
  this.stage = "failed";
  stopWaiting(this, true);
  const { clock, method, path, holdKey } = this.plan;
  const release = clock.hold?.(`${method} ${path}: closing`, holdKey);
  try {
    this.controller?.abort(reason);
  } finally {
    if (release) hostTimers.setImmediate(release);
    releaseHoldSoon(this);
  }
}

function stopWaiting(ex: Exchange, gaveUp: boolean): void {
  if (!ex.waitingForSocket) return;
  ex.waitingForSocket = false;
  ex.plan.connections.waitEnd(ex.plan.holdKey, gaveUp);
}

function releaseHoldSoon(ex: Exchange): void {
  const r = ex.releaseSendHold;
  ex.releaseSendHold = null;
  if (r) hostTimers.setImmediate(r);
}

export function ready(ex: Exchange): boolean {
  switch (ex.waitFor) {
    case "connect":
      return ex.stage !== "connecting";
    case "headers":
      return ex.stage !== "waiting-headers";
    case "body":
      return ex.chunks.length > 0 || ex.stage !== "body";
    case "spent":
      return false;
  }
}

function wake(ex: Exchange): void {
  if (ex.resolveWait && ready(ex)) ex.resolveWait(RESUMED);
}
