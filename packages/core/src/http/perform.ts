/**
 * Performing one request: an attempt with phased limits, inside retry, inside the total budget.
 *
 * Without retry (the hot case) the call and its attempt are two generators, and the attempt enforces
 * the total itself, on the same timer as its phase limits. With retry, the total is a timeout scope
 * around the loop, since it must also end the loop's pauses.
 * @module
 */

import { invalidType } from "../errors.js";
import { isCancelled } from "../kernel/cancelled.js";
import { taskOf } from "../kernel/current.js";
import { checkDeadline } from "../kernel/deadline-missing.js";
import type { Frame } from "../kernel/frame.js";
import { type NotAPromise, notAPromise } from "../kernel/not-a-promise.js";
import { CURRENT_TASK, type Operation } from "../kernel/operation.js";
import type { TaskImpl } from "../kernel/task.js";
import { type AttemptInfo, retry } from "../resilience/retry.js";
import { isTransient } from "../resilience/transient.js";
import { timeoutScope } from "../time/timeout.js";
import { HttpError } from "./errors.js";
import { createExchange } from "./exchange.js";
import type { Exchange } from "./exchange-state.js";
import {
  closePhase,
  endFrame,
  enterLimit,
  openPhase,
  stopTimer,
  throwThrough,
  timeoutError,
  totalTimeout,
} from "./limits.js";
import type { HttpAttemptInfo } from "./options.js";
import type { RequestPlan } from "./plan.js";
import { announcedTooLarge, HttpResponseImpl, tooLarge } from "./response.js";
import { parseRetryAfter } from "./retry-after.js";

const EXCERPT_BYTES = 2048;
/** Failures of attempts that never reached a socket: safe to retry for any method. */
const neverSent = new WeakSet<object>();

export function performRequest(plan: RequestPlan): Operation<unknown> & NotAPromise {
  const op = plan.retry === false && plan.around === null ? new SingleAttempt(plan) : retried(plan);
  // `await client.get(path)` is the awaited-operation mistake too: name the request in its error.
  return notAPromise(op, `http ${plan.label}`);
}

/** A call without retry; every run of it is a new call. */
class SingleAttempt implements Operation<unknown> {
  constructor(private readonly plan: RequestPlan) {}
  [Symbol.iterator](): Iterator<unknown, unknown, unknown> {
    return single(this.plan);
  }
}

function* single(plan: RequestPlan): Generator<unknown, unknown, unknown> {
  const task = taskOf(yield CURRENT_TASK, plan.label);
  task.checkpoint();
  checkDeadline(task, "http", plan.label);
  // The response body belongs to the scope that made the request (not to the total's).
  const owner = task.top;
  const { clock, timeouts } = plan;
  const totalMs = timeouts.totalMs;
  if (totalMs === Infinity) {
    const ex = createExchange(plan, headersFor(plan, task), 0, Infinity);
    // No frame of the attempt's own outlives a phase: the caller's gives the timer back if the
    // task is abandoned.
    const off = owner.onExit(() => stopTimer(ex));
    try {
      return yield* attempt(plan, task, owner, ex, Infinity);
    } finally {
      off();
    }
  }
  const from = clock.now();
  const totalAt = from + totalMs;
  // A spent budget starts nothing (the deadline is inclusive).
  if (totalAt <= from) throw timeoutError(task, plan, "total", totalMs, totalAt, 0);
  const frame = task.pushFrame("timeout", `${plan.label} total`, totalAt);
  let value: unknown;
  try {
    const ex = createExchange(plan, headersFor(plan, task), from, totalMs);
    // The frame gives the timer back on every exit, an abandoned task's included.
    frame.own = () => stopTimer(ex);
    value = yield* attempt(plan, task, owner, ex, totalAt);
  } catch (error) {
    throwThrough(task, frame, error);
  }
  endFrame(task, frame);
  return value;
}

/** A call with retry, or through the client's `around`: the total is a timeout scope around it all. */
function retried(plan: RequestPlan): Operation<unknown> {
  const { label, clock } = plan;
  const policy = plan.retry;
  return {
    *[Symbol.iterator]() {
      const task = taskOf(yield CURRENT_TASK, label);
      task.checkpoint();
      checkDeadline(task, "http", label);
      const owner = task.top;
      const totalMs = plan.timeouts.totalMs;
      const totalDeadline = totalMs === Infinity ? Infinity : clock.now() + totalMs;
      let started = 0;
      const attemptOp = () => oneAttempt(plan, owner, totalDeadline, ++started);
      let op: Operation<unknown>;
      if (policy === false) op = attemptOp();
      else {
        const retryOn = (error: unknown, info: AttemptInfo) =>
          (policy.retryOn ?? isTransient)(error, info) && (plan.idempotent || neverSent.has(error as object));
        const namedAttempt = Object.defineProperty(attemptOp, "name", { value: label });
        op = retry(namedAttempt, { attempts: 3, ...policy, retryOn });
      }
      if (totalDeadline !== Infinity) {
        op = timeoutScope(op, `${label} total`, () => totalDeadline, {
          make: (i) => timeoutError(task, plan, "total", totalMs, i.deadline, i.elapsedMs),
        });
      }
      return yield* op;
    },
  };
}

/**
 * Attempt `n` as an operation: a fresh exchange each time it runs, in whichever task runs it (a
 * hook may hand it to another), through the client's `around` when it has one.
 */
function oneAttempt(plan: RequestPlan, owner: Frame, totalDeadline: number, n: number): Operation<unknown> {
  let wrote = false;
  const request: Operation<unknown> = {
    [Symbol.iterator]: function* () {
      const task = taskOf(yield CURRENT_TASK, plan.label);
      const ex = createExchange(plan, headersFor(plan, task), 0, Infinity);
      // The scope the attempt runs in gives the timer back, an abandoned task's included.
      const off = task.top.onExit(() => stopTimer(ex));
      try {
        return yield* attempt(plan, task, owner, ex, totalDeadline);
      } finally {
        wrote ||= ex.written;
        off();
      }
    },
  };
  const around = plan.around;
  if (around === null) return request;
  const info: HttpAttemptInfo = { attempt: n, method: plan.method, url: plan.href, label: plan.label };
  return {
    *[Symbol.iterator]() {
      try {
        return yield* around(request, info);
      } catch (e) {
        // Refused by the hook (a breaker, a limiter) before anything was sent: safe to retry.
        if (!wrote && !isCancelled(e) && typeof e === "object" && e !== null) neverSent.add(e);
        throw e;
      }
    },
  };
}

/** The request's headers, with the deadline in force when the client sends one downstream. */
function headersFor(plan: RequestPlan, task: TaskImpl<unknown>): Record<string, string> {
  if (!plan.deadlineHeader) return plan.headers;
  const left = task.effectiveDeadline() - plan.clock.now();
  if (left === Infinity) return plan.headers;
  return { ...plan.headers, [plan.deadlineHeader.toLowerCase()]: String(Math.max(0, Math.floor(left))) };
}

/**
 * One attempt: dispatch, connect, headers, then the body (read here for getJson, handed over for
 * the others). The exchange's timer carries the phase limits, and the total when `single` owns it.
 */
function* attempt(
  plan: RequestPlan,
  task: TaskImpl<unknown>,
  owner: Frame,
  ex: Exchange,
  totalDeadline: number,
): Generator<unknown, unknown, unknown> {
  const { clock, method, timeouts, href } = plan;
  const spentAt = task.effectiveDeadline();
  if (spentAt <= clock.now()) {
    // Spent, but its timer has not fired yet (blocking work ran past it): wait here for it, so the
    // cancellation lands before any socket is opened.
    enterLimit(ex, null, spentAt);
    try {
      yield ex.wait("spent");
    } finally {
      stopTimer(ex);
    }
    if (ex.expired === "total") throw totalTimeout(task, ex);
  }
  const startedAt = clock.now();
  // Per-phase events are built only for a listener: this is every request's path.
  const listening = task.runtime.listening;
  if (listening) emitRequest(task, ex, totalDeadline);
  let handedOver = false;
  try {
    ex.start();
    let limit = openPhase(task, ex, "connect", timeouts.connectMs);
    let failure: unknown = null;
    try {
      yield ex.wait("connect");
    } catch (e) {
      failure = e;
    }
    closePhase(task, ex, limit, failure);
    if (listening && ex.stage !== "failed") {
      task.emit({ type: "http:connect", method, url: href, elapsedMs: clock.now() - startedAt });
    }
    limit = openPhase(task, ex, "headers", timeouts.headersMs);
    try {
      yield ex.wait("headers");
    } catch (e) {
      failure = e;
    }
    closePhase(task, ex, limit, failure);
    if (ex.stage === "failed") throw ex.error;
    const status = ex.status;
    if (listening) {
      task.emit({ type: "http:headers", method, url: href, status, elapsedMs: clock.now() - startedAt });
    }
    if (!plan.expect(status)) {
      const excerpt = yield* readBody(task, ex, startedAt, EXCERPT_BYTES);
      const retryAfterMs = parseRetryAfter(ex.headers["retry-after"], clock.now());
      throw new HttpError({
        method,
        url: href,
        status,
        headers: ex.headers,
        bodyExcerpt: excerpt.subarray(0, EXCERPT_BYTES).toString("utf8"),
        ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
        // A POST that reached the server is not safe to send again, whatever its status says.
        retryable: plan.idempotent ? undefined : false,
      });
    }
    if (plan.mode === "json") {
      const body = yield* readBody(task, ex, startedAt, Infinity, plan.maxResponseBytes);
      // A 2xx of a GET: bodyless by its 204 or its `content-length: 0`.
      if (ex.bodyless) return undefined;
      return JSON.parse(body.toString("utf8"));
    }
    // From here on the body's reads have limits of their own.
    stopTimer(ex);
    const res = new HttpResponseImpl(ex, {
      label: plan.label,
      method,
      url: href,
      startedAt,
      bodyIdleMs: timeouts.bodyIdleMs,
      totalDeadline,
      totalMs: timeouts.totalMs,
      maxBytes: plan.maxResponseBytes,
    });
    res.onConsumed(owner.onExit(() => res.release()));
    handedOver = true;
    return res;
  } catch (e) {
    if (!ex.written && !isCancelled(e) && typeof e === "object" && e !== null) neverSent.add(e);
    if (listening)
      task.emit({ type: "http:error", method, url: href, error: e, elapsedMs: clock.now() - startedAt });
    throw e;
  } finally {
    stopTimer(ex);
    // Not read to its end (an error, a timeout, a cancellation, an excerpt): never pooled half-read.
    if (!handedOver && ex.stage !== "done")
      ex.abort(new Error(`${plan.label}: the attempt ended before a response`));
  }
}

/**
 * Emits `http:request` with a `setHeader` that adds a header to this attempt (a trace context); it
 * works only inside the event's delivery, which comes before the request is dispatched.
 */
function emitRequest(task: TaskImpl<unknown>, ex: Exchange, totalDeadline: number): void {
  const { method, href, clock } = ex.plan;
  const deadlineLeftMs = Math.max(0, Math.min(task.effectiveDeadline(), totalDeadline) - clock.now());
  let open = true;
  const setHeader = (name: string, value: string): void => {
    if (typeof name !== "string" || typeof value !== "string")
      throw invalidType(
        "http:request event's setHeader(name, value)",
        "two strings",
        typeof name === "string" ? value : name,
      );
    if (!open)
      throw new RangeError(
        `http:request event's setHeader(${name}): only while the event is delivered, before the request is sent`,
      );
    ex.headersSent = { ...ex.headersSent, [name.toLowerCase()]: value };
  };
  const dispatchWithin = (scope: (dispatch: () => void) => void): void => {
    if (typeof scope !== "function")
      throw invalidType("http:request event's dispatchWithin(scope)", "a function", scope);
    if (!open)
      throw new RangeError(
        "http:request event's dispatchWithin(scope): only while the event is delivered, before the request is sent",
      );
    ex.dispatchScope = scope;
  };
  task.emit({ type: "http:request", method, url: href, setHeader, dispatchWithin, deadlineLeftMs });
  open = false;
}

/**
 * Reads the body until its end, or until `max` bytes: every wait bounded by the gap allowed between
 * chunks (once a first one has come) and by the timer's total. A body over `limit` bytes throws.
 */
function* readBody(
  task: TaskImpl<unknown>,
  ex: Exchange,
  startedAt: number,
  max: number,
  limit = Infinity,
): Generator<unknown, Buffer, unknown> {
  const plan = ex.plan;
  const announced = announcedTooLarge(ex, limit);
  if (announced) throw announced;
  let parts: Buffer[] | null = null;
  let size = 0;
  for (;;) {
    task.checkpoint();
    if (ex.chunks.length === 0 && ex.stage === "body") {
      ex.resumeReading();
      // The idle limit is the longest gap *between* chunks (conformance 116(d)): the wait for the
      // first chunk after the headers is bounded by the total budget and the deadline only.
      const idleMs = ex.receivedBytes > 0 ? plan.timeouts.bodyIdleMs : Infinity;
      const limit = openPhase(task, ex, "body", idleMs);
      let failure: unknown = null;
      try {
        yield ex.wait("body");
      } catch (e) {
        failure = e;
      }
      closePhase(task, ex, limit, failure);
      continue;
    }
    const taken = ex.take();
    for (const c of taken) size += c.length;
    if (size > limit) throw tooLarge(plan.label, limit, size, false);
    parts = parts === null ? taken : parts.concat(taken);
    if (size >= max) break;
    if (ex.stage === "failed") throw ex.error;
    if (ex.stage === "done") {
      const { method, href } = plan;
      task.emit({
        type: "http:body",
        method,
        url: href,
        bytes: ex.receivedBytes,
        elapsedMs: plan.clock.now() - startedAt,
      });
      break;
    }
  }
  return parts.length === 1 ? parts[0]! : Buffer.concat(parts);
}
