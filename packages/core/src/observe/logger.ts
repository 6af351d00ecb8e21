/**
 * The logger hook: Keel's warnings and, on request, its events as structured records.
 * @module
 */
import { invalidType } from "../errors.js";
import { printThrown, roundMs } from "../format-value.js";
import { NO_FIELDS as NO_TASK_FIELDS, recordFields } from "../kernel/log-fields.js";
import { describeWarning } from "../kernel/runtime.js";
import type { KeelEvent, KeelEventType } from "./events.js";
import { ErrorSummary, errorAtInfo, levelOf } from "./levels.js";

/**
 * How much a record matters; `error` is only `main`'s report of a failed root.
 *
 * @example
 * ```ts
 * import { type LogLevel, run, shield, sleep, spawn, suspend } from "@keel/core";
 * const levels: LogLevel[] = [];
 * await run(function* () {
 *   const w = yield* spawn(function* () { try { yield* suspend(); } finally { yield* shield(sleep(50)); } });
 *   yield* sleep(1);
 *   yield* w.cancel();
 * }, { cleanupBudgetMs: 10, logger: (r) => levels.push(r.level) });
 * console.log(levels[0]); // warn (the cleanup overran its 10 ms)
 * ```
 */
export type LogLevel = "debug" | "info" | "warn" | "error";

/**
 * One line of Keel's log: a warning, an event (with `logEvents`), or a line of `main`'s.
 *
 * @example
 * ```ts
 * import { type LogRecord, run, sleep, timeout } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const records: LogRecord[] = [];
 * await run(function* () {
 *   try { yield* timeout(10, sleep(100)); } catch {}
 * }, { clock: createVirtualClock(), logger: (r) => records.push(r), logEvents: "info" });
 * const fired = records.find((r) => r.event === "timeout:fire")!;
 * console.log(fired.level, fired.sinceStartMs, fired.fields.timeoutMs); // info 10 10
 * ```
 */
export interface LogRecord {
  readonly level: LogLevel;
  /** One readable line: `keel: cleanup:overrun at main#1/worker#3: cleanup exceeded 5000 ms while waiting on sleep(60000)`. */
  readonly message: string;
  /** The event's `type`; null for a line of `main`'s own (a signal received, a tree dump). */
  readonly event: KeelEventType | null;
  /** The task's path (`main#1/worker#3`) and id; null for a line about no task. */
  readonly path: string | null;
  readonly taskId: number | null;
  /** The clock's time as an ISO date (on the real clock, the wall time; on a virtual one, from 1970). */
  readonly time: string;
  /** Milliseconds since the root started, on its clock. */
  readonly sinceStartMs: number;
  /**
   * The log fields of the task the record is about (a worker's job: `queue`, `jobId`, `attempt`; see
   * `spawn`'s `logFields`), then the event's own (`reason`, `error`, `budgetMs`, `waitingOn`…), as
   * people read them: durations (`…Ms`) to at most one decimal, the `deadline` instant as an ISO
   * date like `time`; `main`'s extras (`tree`). In an `info` record an `error` is
   * `{ type, message, code }`, without its stack, unless it ended a job (a dead letter); `debug` and
   * `warn` records carry the error.
   */
  readonly fields: Readonly<Record<string, unknown>>;
}

/**
 * Receives Keel's log records (a `run` or `main` option): per run, like `onEvent`, so two runs in
 * one process may log to different places. See {@link pinoLogger} for pino.
 *
 * @example
 * ```ts
 * import { type KeelLogger, run } from "@keel/core";
 * const logger: KeelLogger = (r) => console.log(JSON.stringify({ level: r.level, msg: r.message, path: r.path }));
 * await run(function* () {}, { logger });
 * ```
 */
export type KeelLogger = (record: LogRecord) => void;

/**
 * Which events a logger gets besides warnings: `true` or `"debug"` every one, `"info"` the notable:
 * a job's outcome (one line per delivery), a timeout that fired, a retry given up, a breaker's
 * change, the shutdown's steps. Starts, settles, attempts, HTTP phases and errors, retries that
 * recovered, waits and the cancellations a scope makes as it exits are `debug`.
 *
 * @example
 * ```ts
 * import { type LogEvents, run, sleep } from "@keel/core";
 * const logEvents: LogEvents = "debug";
 * const seen: string[] = [];
 * await run(function* job() { yield* sleep(1); }, { logger: (r) => seen.push(`${r.level} ${r.event}`), logEvents });
 * console.log(seen); // ["debug task:start", "debug task:settle"]
 * ```
 */
export type LogEvents = boolean | "debug" | "info";

/** @internal Turns an event into its record; `origin` is the root's start on its clock. */
export function eventRecord(event: KeelEvent, origin: number): LogRecord {
  const { type, at, taskId, path, ...own } = event;
  const said = describeWarning(event);
  const level = levelOf(event);
  if (level === "info" && "error" in own) (own as { error: unknown }).error = errorAtInfo(event, own.error);
  const task = recordFields();
  const fields = task === NO_TASK_FIELDS ? own : withTaskFields(type, own, task);
  return {
    level,
    message: `keel: ${type} at ${path}${said ? `: ${said}` : ""}`,
    event: type,
    path,
    taskId,
    time: isoTime(at),
    sinceStartMs: Math.round(at - origin),
    fields: readableFields(fields),
  };
}

/**
 * An event's top-level numbers as a record shows them: `…Ms` durations rounded to at most one
 * decimal (a real clock gives `107.455322265625`), a finite `deadline` as an ISO date. The event
 * itself is left as it is; a record without such numbers shares its fields object.
 */
function readableFields(fields: Record<string, unknown>): Record<string, unknown> {
  let out: Record<string, unknown> | undefined;
  for (const key of Object.keys(fields)) {
    const value = fields[key];
    if (typeof value !== "number" || !Number.isFinite(value)) continue;
    const readable = key === "deadline" ? isoTime(value) : key.endsWith("Ms") ? roundMs(value) : value;
    if (readable !== value) (out ??= { ...fields })[key] = readable;
  }
  return out ?? fields;
}

/**
 * The task's log fields over the event's: they say which job (or request) a record belongs to, and a
 * filter on them (`jobId=m1 attempt=2`) must find every record of it. An event's field that one of
 * them hides with another value keeps its value under its family's name (`retry:giveup`'s own
 * `attempt` becomes `retryAttempt`); a field with the same value (a `worker:job`'s) is one field.
 */
function withTaskFields(
  type: KeelEventType,
  own: Record<string, unknown>,
  task: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  const fields: Record<string, unknown> = { ...own, ...task };
  for (const name in task) {
    if (!(name in own) || Object.is(own[name], task[name])) continue;
    const family = type.slice(0, type.indexOf(":"));
    fields[`${family}${name.charAt(0).toUpperCase()}${name.slice(1)}`] = own[name];
  }
  return fields;
}

/** An ISO date for a clock reading; a clock far outside dates' range still gives a record. */
export function isoTime(at: number): string {
  const d = new Date(at);
  return Number.isNaN(d.getTime()) ? String(at) : d.toISOString();
}

/**
 * @internal The `onEvent` a run gets from its `onEvent`, `logger` and `logEvents` options: null when
 * nothing listens to every event (the logger then only takes warnings, through `warningSink`).
 */
export function composeListener(
  onEvent: ((event: KeelEvent) => void) | undefined,
  logger: KeelLogger | undefined,
  logEvents: LogEvents | undefined,
  origin: number,
): ((event: KeelEvent) => void) | undefined {
  const minimum =
    logEvents === true || logEvents === "debug" ? "debug" : logEvents === "info" ? "info" : "warn";
  const toLogger = logger
    ? (event: KeelEvent) => {
        const level = levelOf(event);
        if (minimum === "warn" ? level !== "warn" : minimum === "info" && level === "debug") return;
        deliver(logger, eventRecord(event, origin));
      }
    : undefined;
  if (!onEvent) return minimum === "warn" ? undefined : toLogger;
  if (!toLogger) return onEvent;
  return (event) => {
    try {
      onEvent(event);
    } finally {
      toLogger(event);
    }
  };
}

/** @internal Hands a record to the logger; a logger that throws is reported, never fatal. */
export function deliver(logger: KeelLogger, record: LogRecord): void {
  try {
    logger(record);
  } catch (e) {
    printThrown("keel: a logger threw", e);
  }
}

/**
 * The methods {@link pinoLogger} calls: pino's, or any logger's with the same shape.
 *
 * @example
 * ```ts
 * import { type PinoLike, pinoLogger, run, sleep, timeout } from "@keel/core";
 * const lines: string[] = [];
 * const console_: PinoLike = {
 *   warn: (o, m) => lines.push(`WARN ${m}`),
 *   info: (o, m) => lines.push(`INFO ${m} ${o.path}`),
 *   debug: () => {},
 * };
 * await run(function* () { try { yield* timeout(5, sleep(10)); } catch {} }, { logger: pinoLogger(console_), logEvents: "info" });
 * console.log(lines.length); // 1: the timeout firing (its cancellation request is debug)
 * ```
 */
export interface PinoLike {
  warn(object: Record<string, unknown>, message: string): void;
  info(object: Record<string, unknown>, message: string): void;
  debug(object: Record<string, unknown>, message: string): void;
  error?(object: Record<string, unknown>, message: string): void;
}

/**
 * A {@link KeelLogger} writing to a pino logger (or anything with pino's `warn`/`info`/`debug`
 * methods): each record at its level, as `{ keel: type, path, taskId, sinceStartMs, ...fields }`
 * with the record's message (`fields` holds the task's log fields: a job's `queue`, `jobId` and
 * `attempt`); an `error` field goes under `err`, so pino's error serializer prints it with its
 * stack, except an `info` record's summary of one (`{ type, message, code }`, see
 * {@link LogRecord}), which goes under `error`. pino adds its own `time`. For the
 * application's own lines, a mixin reading `logFields()` adds the same fields. Keel does not import
 * pino.
 *
 * @example
 * ```ts
 * import { pinoLogger, run, withCleanupBudget, sleep, shield, spawn, suspend } from "@keel/core";
 * import pino from "pino";
 * const log = pino({ level: "debug" });
 * await run(function* () {
 *   const w = yield* spawn(function* worker() {
 *     try { yield* suspend(); } finally { yield* shield(sleep(20)); }
 *   });
 *   yield* sleep(1);
 *   yield* w.cancel();
 * }, { logger: pinoLogger(log), logEvents: "debug" });
 * // {"level":20,…,"keel":"cancel:request","path":"run#1/worker#2",…,"msg":"keel: cancel:request at run#1/worker#2"}
 * ```
 */
export function pinoLogger(pino: PinoLike): KeelLogger {
  if (
    typeof pino !== "object" ||
    pino === null ||
    typeof pino.warn !== "function" ||
    typeof pino.info !== "function" ||
    typeof pino.debug !== "function"
  )
    throw invalidType(
      "pinoLogger(pino)",
      "an object with warn, info and debug methods (a pino logger)",
      pino,
    );
  return (r) => {
    const { error, ...rest } = r.fields as { error?: unknown };
    const object: Record<string, unknown> = {
      keel: r.event,
      path: r.path,
      taskId: r.taskId,
      sinceStartMs: r.sinceStartMs,
      ...rest,
    };
    // A full error under `err`, where pino's serializer prints its stack; a summary (an `info`
    // record's) under `error`, which the serializer leaves as it is.
    if (ErrorSummary.is(error)) object.error = error;
    else if (error !== undefined) object.err = error;
    if (r.level === "error") (pino.error ?? pino.warn).call(pino, object, r.message);
    else pino[r.level](object, r.message);
  };
}
