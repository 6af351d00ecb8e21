/**
 * The level of each event's log record, and which errors keep their stack at `info`: the rule that
 * keeps `logEvents: "info"` readable for a healthy worker (at most one line per job: its outcome).
 * @module
 */
import { describeThrown } from "../format-value.js";
import type { KeelEvent, KeelEventType } from "./events.js";
import { warningEvents } from "./events.js";

/**
 * Debug: what every task, request, attempt or wait has, and what a line at `info` already says.
 * A healthy worker's jobs make every one of these: task starts and settles, the handler's timeout
 * scope, an HTTP call's phases, its attempts and the retries that recovered (the job's outcome says
 * how it ended), the waits on a semaphore, a limiter or a channel.
 */
const DEBUG_EVENTS: ReadonlySet<KeelEventType> = new Set<KeelEventType>([
  "task:start",
  "task:settle",
  "timeout:superseded",
  "timeout:start",
  "timeout:end",
  "retry:start",
  "retry:attempt",
  "retry:success",
  "retry:sleep",
  "retry:end",
  "http:request",
  "http:connect",
  "http:headers",
  "http:body",
  "http:error",
  "http:timeout",
  "shield:delay",
  "worker:add",
  "semaphore:wait",
  "semaphore:acquire",
  "limiter:wait",
  "limiter:acquire",
  "channel:depth",
]);

/**
 * The level of an event's record: `warn` for a warning; `info` for what an operator reads (a job's
 * outcome, a timeout that fired, a retry given up, a breaker, the shutdown's steps, a cancellation
 * by `main`'s signal); `debug` for the rest. A job's `start` is `debug` (its outcome says it ran);
 * a `cancel:request` is `debug` unless a shutdown made it: a scope that exits cancels its children,
 * and a timeout, a cut job or a failed group has a record of its own.
 */
export function levelOf(event: KeelEvent): "debug" | "info" | "warn" {
  const type = event.type;
  if (warningEvents.has(type)) return "warn";
  if (type === "worker:job") return event.transition === "start" ? "debug" : "info";
  // An execution's end, park and hand-back are what an operator reads; its steps are the detail.
  if (type === "workflow:step") return "debug";
  if (type === "workflow:execution") return event.transition === "run" ? "debug" : "info";
  if (type === "cancel:request") return event.reason.kind === "shutdown" ? "info" : "debug";
  return DEBUG_EVENTS.has(type) ? "debug" : "info";
}

/**
 * An error as an `info` record gives it: what it is, without its stack. A class of its own, so that
 * `pinoLogger` can tell it from a thrown value (pino's error serializer would give any object with
 * a `message` a `stack`, empty).
 */
export class ErrorSummary {
  /** A brand, checked with `#summary in x`: unlike `instanceof`, it runs no trap of a Proxy. */
  readonly #summary = true;
  readonly type: string;
  readonly message: unknown;
  readonly code?: unknown;
  constructor(type: string, message: unknown, code: unknown) {
    this.type = type;
    this.message = message;
    if (code !== undefined) this.code = code;
  }

  /** Whether `value` is a summary; safe on any thrown value (a Proxy whose every trap throws). */
  static is(value: unknown): value is ErrorSummary {
    return typeof value === "object" && value !== null && #summary in value;
  }
}

/**
 * An event's `error` as an `info` record gives it: without its stack, unless the error ended a job
 * (a dead letter), where the stack is what the operator needs. A retried job, a retry given up or a
 * timeout still names the error (`type`, `message`, `code`); its stack is at `debug`.
 */
export function errorAtInfo(event: KeelEvent, error: unknown): unknown {
  if (event.type === "worker:job" && event.transition === "dead-letter") return error;
  if (typeof error !== "object" || error === null) return error;
  try {
    const e = error as { name?: unknown; message?: unknown; code?: unknown };
    const type = typeof e.name === "string" ? e.name : (error.constructor?.name ?? "Object");
    return new ErrorSummary(type, e.message, e.code);
  } catch {
    // A thrown value whose getters throw (a Proxy): described without reading it again.
    return describeThrown(error);
  }
}
