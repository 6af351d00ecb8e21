/**
 * `run`: start a root task.
 * @module
 */
import { checkDurationMs, invalidType } from "./errors.js";
import { describeThrown } from "./format-value.js";
import { captureAsyncContext } from "./kernel/async-context.js";
import type { Clock } from "./kernel/clock.js";
import type { ContextValues } from "./kernel/context-values.js";
import { WARN_NO_DEADLINE_KEY } from "./kernel/deadline-missing.js";
import { checkOp, nameOf, type Op } from "./kernel/operation.js";
import { RANDOM_CONTEXT_KEY, type RandomSource } from "./kernel/random.js";
import { trackRoot } from "./kernel/roots.js";
import { createRuntime } from "./kernel/runtime.js";
import { BUDGET_KEY, CLOCK_KEY, DEFAULT_CLEANUP_BUDGET_MS, type Task, TaskImpl } from "./kernel/task.js";
import type { KeelEvent } from "./observe/events.js";
import { composeListener, deliver, eventRecord, type KeelLogger, type LogEvents } from "./observe/logger.js";
import { realClock } from "./time/real-clock.js";

/**
 * Options of {@link run}.
 *
 * @example
 * ```ts
 * import { type KeelEvent, random, type RunOptions, run, sleep } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const events: KeelEvent[] = [];
 * const shutdown = new AbortController();
 * const options: RunOptions = {
 *   name: "nightly",
 *   clock: createVirtualClock(), // an hour passes in a millisecond
 *   cleanupBudgetMs: 1000,
 *   onEvent: (e) => events.push(e),
 *   random: () => 0.25,
 *   signal: shutdown.signal, // aborting it cancels the task
 * };
 * const drawn = await run(function* () { yield* sleep(3_600_000); return yield* random(); }, options);
 * console.log(drawn, events.map((e) => `${e.type}@${e.at}`)); // 0.25 ["task:start@0", "task:settle@3600000"]
 * ```
 */
export interface RunOptions {
  /** The task's name in the tree and in events (default: the generator function's name). */
  name?: string;
  /** The clock for every timer in the tree (default: the real clock; tests pass a virtual one). */
  clock?: Clock;
  /** How long unwinding may take once a cancellation is delivered (default 5000 ms). */
  cleanupBudgetMs?: number;
  /** Receives every event of the tree; without it, warnings go to `console.warn`. */
  onEvent?: (event: KeelEvent) => void;
  /** The random source for jitter and anything else random in the tree (default `Math.random`). */
  random?: RandomSource;
  /**
   * Receives Keel's warnings as structured records instead of `console.warn`, and the events that
   * `logEvents` asks for. See {@link pinoLogger} for pino.
   */
  logger?: KeelLogger;
  /** Which events the logger gets besides warnings: `true`/`"debug"` every one, `"info"` the notable (default none). */
  logEvents?: LogEvents;
  /**
   * Warns (`deadline:missing`) when an external call (an HTTP request, a worker job's handler) runs
   * with no deadline anywhere above it: such a call can wait forever. Off by default.
   */
  warnNoDeadline?: boolean;
  /**
   * Cancels the task when aborted, as `task.cancel(message)` would (reason kind `"cancel"`, the
   * signal's reason as the message). Already aborted: the task is cancelled before its first turn,
   * so none of its code runs.
   */
  signal?: AbortSignal;
}

/**
 * Starts `op` as a root task and returns it at once; the body starts on the next turn.
 *
 * Await the task for its value (a cancelled task rejects with `TaskCancelledError`), or call
 * `task.cancel()`, which settles once everything under it has unwound. The task is a promise
 * (`then`, `catch`, `finally`); a task that fails while nobody has joined it is reported as an
 * unhandled rejection, as a promise's would be. A task that ends cancelled is not.
 *
 * Every step of the tree's tasks runs in the async context (`AsyncLocalStorage` stores) in force at
 * this call, whatever other runs do meanwhile: see the guide's async context page.
 *
 * @example
 * ```ts
 * import { run, sleep } from "@keel/core";
 * const task = run(function* hello() { yield* sleep(10); return "hello"; });
 * console.log(await task); // "hello"
 * const stop = new AbortController();
 * const worker = run(function* worker() { yield* sleep(60_000); }, { signal: stop.signal });
 * stop.abort("no longer needed");
 * console.log(await worker.catch((e: Error) => e.message)); // task worker#2 was cancelled (cancel: no longer needed)
 * ```
 * @throws `TypeError` when `op` is not an operation or an option has the wrong type; `RangeError`
 * for a bad `cleanupBudgetMs`. Thrown at the call, before anything starts.
 */
export function run<T>(op: Op<T>, options: RunOptions = {}): Task<T> {
  return startRoot(op, options, false);
}

/** @internal `run`'s body; `main` starts its root here as `longLived` (it lives as long as the process). */
export function startRoot<T>(op: Op<T>, options: RunOptions, longLived: boolean): Task<T> {
  checkOp("run(op)", op);
  const { budget, clock } = checkRootOptions("run", options);
  const task = new TaskImpl(op, {
    name: options.name ?? nameOf(op, "run"),
    parent: null,
    owner: null,
    runtime: rootRuntime(options, clock.now()),
    contexts: rootContexts(clock, budget, options.random, options.warnNoDeadline === true),
    deadline: Infinity,
    longLived,
  });
  task.whenSettled(() => task.reportUnhandledFailure());
  trackRoot(task as TaskImpl<unknown>);
  if (options.signal) followSignal(task, options.signal);
  return task.start();
}

/** The runtime of a root: its `onEvent`, and its logger with what it asked for. */
function rootRuntime(options: RunOptions, origin: number) {
  const { onEvent, logger, logEvents } = options;
  const listener = composeListener(onEvent, logger, logEvents, origin);
  const onWarning = logger ? (event: KeelEvent) => deliver(logger, eventRecord(event, origin)) : undefined;
  return createRuntime(captureAsyncContext(), listener, origin, onWarning);
}

/**
 * @internal Checks the options a root takes (`run`, `main`), naming `entry(op, { option })` in the
 * error, and gives the budget and clock in force.
 */
export function checkRootOptions(entry: string, options: unknown): { budget: number; clock: Clock } {
  if (typeof options !== "object" || options === null || Array.isArray(options))
    throw invalidType(`${entry}(op, options)`, "an object", options);
  const { name, clock, onEvent, random, signal, cleanupBudgetMs, logger, logEvents, warnNoDeadline } =
    options as RunOptions;
  if (warnNoDeadline !== undefined && typeof warnNoDeadline !== "boolean")
    throw invalidType(`${entry}(op, { warnNoDeadline })`, "a boolean", warnNoDeadline);
  const at = (option: string) => `${entry}(op, { ${option} })`;
  if (name !== undefined && typeof name !== "string") throw invalidType(at("name"), "a string", name);
  if (onEvent !== undefined && typeof onEvent !== "function")
    throw invalidType(at("onEvent"), "a function", onEvent);
  if (logger !== undefined && typeof logger !== "function")
    throw invalidType(at("logger"), "a function taking a LogRecord (pinoLogger(pino) makes one)", logger);
  if (
    logEvents !== undefined &&
    typeof logEvents !== "boolean" &&
    logEvents !== "debug" &&
    logEvents !== "info"
  )
    throw invalidType(at("logEvents"), 'true, false, "debug" or "info"', logEvents);
  if (random !== undefined && typeof random !== "function")
    throw invalidType(at("random"), "a function returning a number in [0, 1)", random);
  if (
    clock !== undefined &&
    (typeof clock !== "object" ||
      clock === null ||
      typeof clock.now !== "function" ||
      typeof clock.schedule !== "function")
  )
    throw invalidType(at("clock"), "a Clock (with now() and schedule())", clock);
  if (signal !== undefined && !isAbortSignal(signal))
    throw invalidType(at("signal"), "an AbortSignal", signal);
  const budget = checkDurationMs(at("cleanupBudgetMs"), cleanupBudgetMs ?? DEFAULT_CLEANUP_BUDGET_MS, false);
  return { budget, clock: clock ?? realClock };
}

function isAbortSignal(value: unknown): value is AbortSignal {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as AbortSignal).aborted === "boolean" &&
    typeof (value as AbortSignal).addEventListener === "function" &&
    typeof (value as AbortSignal).removeEventListener === "function"
  );
}

/**
 * Cancels `task` when `signal` aborts (at once if it already has: the request is in before the
 * first turn, so no code of the task runs). The listener goes when the task settles, so a
 * long-lived signal does not hold every task it ever governed.
 */
function followSignal(task: TaskImpl<unknown>, signal: AbortSignal): void {
  const abort = () => {
    task.cancel(abortMessage(signal.reason));
  };
  if (signal.aborted) {
    abort();
    return;
  }
  signal.addEventListener("abort", abort, { once: true });
  task.whenSettled(() => signal.removeEventListener("abort", abort));
}

/** The cancellation's message from a signal's reason: a string as is, anything else described. */
function abortMessage(reason: unknown): string {
  return typeof reason === "string" ? reason : `aborted: ${describeThrown(reason)}`;
}

/**
 * Built by assignment, not with a spread: a spread of symbol keys leaves the object in dictionary
 * mode, and every task reads its clock and budget from here (or from a frame that inherits them).
 */
function rootContexts(
  clock: Clock,
  budget: number,
  random: RandomSource | undefined,
  warnNoDeadline: boolean,
): ContextValues {
  const contexts: ContextValues = { [CLOCK_KEY]: clock, [BUDGET_KEY]: budget };
  if (random) contexts[RANDOM_CONTEXT_KEY] = random;
  if (warnNoDeadline) contexts[WARN_NO_DEADLINE_KEY] = true;
  return contexts;
}
