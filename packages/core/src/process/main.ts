/**
 * `main`: run an operation as a process, with signals mapped to cancellation (semantics §8).
 * @module
 */
import { checkDurationMs, invalidType, KeelError } from "../errors.js";
import { describeThrown } from "../format-value.js";
import type { CancelReason } from "../kernel/cancelled.js";
import type { Clock } from "../kernel/clock.js";
import { hostPerformance } from "../kernel/host.js";
import { checkOp, nameOf, type Op } from "../kernel/operation.js";
import { otherLiveRoots } from "../kernel/roots.js";
import { setStepWatch, type TaskImpl } from "../kernel/task.js";
import type { KeelEvent } from "../observe/events.js";
import { formatTaskTree } from "../observe/format-tree.js";
import { deliver, isoTime, type KeelLogger, type LogEvents, type LogLevel } from "../observe/logger.js";
import { snapshot } from "../observe/snapshot.js";
import { checkRootOptions, startRoot } from "../run.js";
import { openInspectSocket } from "./inspect-server.js";

/**
 * Options of {@link main}.
 *
 * @example
 * ```ts
 * import { type MainOptions, main, suspend } from "@keel/core";
 * const options: MainOptions = {
 *   name: "api",
 *   cleanupBudgetMs: 1000,
 *   shutdownBudgetMs: 2000,
 *   onEvent: (e) => { if (e.type === "task:settle") console.log(e.path.replace(/#\d+/, ""), e.state); },
 * };
 * await main(function* () { yield* suspend(); }, options); // on SIGINT: logs "api cancelled", exits with code 130
 * ```
 */
export interface MainOptions {
  /** The root task's name in the tree and in events (default: the generator function's name). */
  name?: string;
  /** How long unwinding may take once a cancellation is delivered (default 5000 ms). */
  cleanupBudgetMs?: number;
  /**
   * How long the whole tree may take to unwind after the first SIGINT/SIGTERM before the process is
   * ended with exit code 1 (default: the cleanup budget). `Infinity` waits for as long as it takes.
   */
  shutdownBudgetMs?: number;
  /** Receives every event of the tree; without it, warnings go to `console.warn`. */
  onEvent?: (event: KeelEvent) => void;
  /** The clock for every timer in the tree, the shutdown budget's included (default: the real clock). */
  clock?: Clock;
  /**
   * Receives Keel's warnings and `main`'s own lines (a signal received, a tree dump under
   * `fields.tree`, a failed root at level `error`) as records instead of stderr. See `pinoLogger`.
   */
  logger?: KeelLogger;
  /** Which events the logger gets besides warnings (as in `run`). */
  logEvents?: LogEvents;
  /** As in `run`: warn when an HTTP call or a job runs with no deadline of its caller's. */
  warnNoDeadline?: boolean;
  /**
   * Reports (`task:blocked`, a warning) every step of a task that ran this long or longer without
   * yielding, holding the event loop: a synchronous loop, a huge `JSON.parse`. Off by default; each
   * step is timed on the host's monotonic clock while it is on.
   */
  blockedStepMs?: number;
  /**
   * Answers `keel-inspect <pid>` with the live task trees (this root's, then every `run()` root's),
   * over a unix socket in the temporary directory named by the pid (mode 0600, removed at exit).
   * Also on with `KEEL_INSPECT=1` in the environment. Not on Windows.
   */
  inspect?: boolean;
}

/** The process's main root while it runs (semantics §8: one `main` per process). */
let runningMain: TaskImpl<unknown> | null = null;

/** The conventional exit codes of a process ended by a signal: 128 + the signal's number. */
const SIGNAL_EXIT_CODES = { SIGINT: 130, SIGTERM: 143 } as const;
type ShutdownSignal = keyof typeof SIGNAL_EXIT_CODES;

/**
 * Runs `op` as the root task of a process: the first SIGINT or SIGTERM cancels it, and the process
 * exits once everything has unwound.
 *
 * Outcomes, and how the process ends:
 * - the root completes: the signal handlers are removed and the promise resolves (nothing calls
 *   `process.exit`, so the exit code stays 0 unless something else sets it);
 * - the root fails: its error (stack, `cause` chain, every `suppressed` error) is printed to stderr,
 *   and the process exits with code 1;
 * - a signal cancelled it and it unwound in time: exit code 130 (SIGINT) or 143 (SIGTERM);
 * - the shutdown budget runs out, or a second SIGINT/SIGTERM arrives during shutdown: the tree of
 *   what is still running is printed to stderr and the process exits at once, with code 1 (budget)
 *   or 130/143 (the second signal).
 *
 * One `main` per process: calling it while another runs throws `KEEL_MAIN_RUNNING`. Roots started
 * with `run()` beside it share its shutdown: a signal cancels them too (reason `shutdown`), and
 * before `main` ends the process (any outcome but completion) it cancels the roots still live and
 * waits for them to unwind, within `shutdownBudgetMs`; the tree printed on an overrun lists them.
 *
 * SIGUSR2 prints the live task tree to stderr and changes nothing else: the way to ask a stuck
 * process what it waits on. While the root runs, `main` keeps the process alive, so a root that only
 * waits for a signal (`yield* suspend()`) does not end when the event loop runs dry.
 *
 * **Cancellation**: the signal's request comes from outside the root (reason kind `"shutdown"`), so
 * no scope converts it: the root ends cancelled, or failed when a `finally` throws.
 *
 * **Time**: each task's unwinding is bounded by `cleanupBudgetMs`; the whole shutdown by
 * `shutdownBudgetMs`, counted from the first signal on the tree's clock.
 *
 * @example
 * ```ts
 * import { main, sleep, suspend } from "@keel/core";
 * await main(function* server() {
 *   try {
 *     yield* suspend(); // serve until SIGINT/SIGTERM
 *   } finally {
 *     yield* sleep(100); // drain connections: async cleanup is allowed, within the budget
 *   }
 * }, { shutdownBudgetMs: 3000 });
 * ```
 * @throws `TypeError` when `op` is not an operation or an option has the wrong type; `RangeError`
 * for a negative or NaN `cleanupBudgetMs` or `shutdownBudgetMs`, and for an infinite `cleanupBudgetMs`
 * (cleanup is always bounded; an infinite `shutdownBudgetMs` only means no overall deadline);
 * `KeelError` `KEEL_MAIN_RUNNING` while another `main` runs. Thrown at the call, before anything
 * starts or any handler is installed.
 */
export function main<T>(op: Op<T>, options: MainOptions = {}): Promise<void> {
  checkOp("main(op)", op);
  const { budget: cleanupBudgetMs } = checkRootOptions("main", options);
  const { name, onEvent, clock, logger, logEvents, warnNoDeadline } = options;
  const shutdownBudgetMs = checkDurationMs(
    "main(op, { shutdownBudgetMs })",
    options.shutdownBudgetMs ?? cleanupBudgetMs,
  );
  const blockedStepMs =
    options.blockedStepMs === undefined
      ? null
      : checkDurationMs("main(op, { blockedStepMs })", options.blockedStepMs);
  if (options.inspect !== undefined && typeof options.inspect !== "boolean")
    throw invalidType("main(op, { inspect })", "a boolean", options.inspect);
  const inspect = options.inspect ?? process.env.KEEL_INSPECT === "1";

  if (runningMain) {
    throw new KeelError(
      "KEEL_MAIN_RUNNING",
      `main(op): ${runningMain.path} is already the main of this process; run one main per process ` +
        "and start other work under it (spawn), or beside it with run()",
    );
  }
  const task = startRoot(
    op,
    {
      name: name ?? nameOf(op, "main"),
      cleanupBudgetMs,
      ...(onEvent ? { onEvent } : {}),
      ...(clock ? { clock } : {}),
      ...(logger ? { logger } : {}),
      ...(logEvents !== undefined ? { logEvents } : {}),
      ...(warnNoDeadline !== undefined ? { warnNoDeadline } : {}),
    },
    true,
  ) as TaskImpl<T>;
  // main reports the root's failure itself (printed, exit code 1).
  task.markHandled();
  const origin = task.clock.now();
  /**
   * One line of main's own: to the logger as a record (`details` under `fields`), or to stderr as
   * text (the detail's text on the lines after).
   */
  const say = (level: LogLevel, message: string, text?: string, details: Record<string, unknown> = {}) => {
    if (!logger) {
      process.stderr.write(`keel: ${message}\n${text === undefined ? "" : `${text}\n`}`);
      return;
    }
    const at = task.clock.now();
    deliver(logger, {
      level,
      message: `keel: ${message}`,
      event: null,
      path: task.path,
      taskId: task.id,
      time: isoTime(at),
      sinceStartMs: Math.round(at - origin),
      fields: details,
    });
  };
  const restoreStepWatch =
    blockedStepMs === null
      ? null
      : setStepWatch({ thresholdMs: blockedStepMs, now: () => hostPerformance.now() });
  let closeInspect: (() => void) | null = null;
  let settled = false;
  if (inspect && process.platform !== "win32") {
    openInspectSocket(task).then(
      (close) => {
        if (settled) close();
        else closeInspect = close;
      },
      (e: unknown) => say("warn", `keel-inspect socket not opened: ${describeThrown(e)}`),
    );
  }
  runningMain = task as TaskImpl<unknown>;

  return new Promise<void>((resolve) => {
    let signalled: ShutdownSignal | null = null;
    let cancelBudget: (() => void) | null = null;
    const cancelKeepAlive = keepAlive();

    /** This root's tree, then every other live root's (`run` beside `main`). */
    const printTree = (headline: string, level: LogLevel = "warn") => {
      const tree = [task, ...otherLiveRoots(task)].map((root) => formatTaskTree(snapshot(root))).join("\n");
      say(level, headline, tree, { tree });
    };

    /** Ends the process once the shutdown budget, counted from `at`, runs out (if it has one). */
    const armBudget = (at: number) => {
      if (shutdownBudgetMs === Infinity || cancelBudget) return;
      cancelBudget = task.clock.schedule(at + shutdownBudgetMs, () => {
        printTree(`shutdown exceeded its budget of ${shutdownBudgetMs} ms; still running:`);
        process.exit(1);
      });
    };

    const onShutdownSignal = (signal: ShutdownSignal) => {
      if (signalled) {
        // The operator insists: no more waiting, but say what was still holding the process up.
        printTree(`${signal} again during shutdown; exiting now. Still running:`);
        process.exit(SIGNAL_EXIT_CODES[signal]);
      }
      signalled = signal;
      const at = task.clock.now();
      const budget = shutdownBudgetMs === Infinity ? "no budget" : `budget ${shutdownBudgetMs} ms`;
      say("info", `${signal} received; shutting down (${budget}; send it again to exit now)`);
      // Armed before the cancellation is delivered, so when the shutdown budget equals the cleanup
      // budget this timer fires first (same instant, registration order) and the process exits 1
      // with the tree of what hung, instead of waiting for the root's cut and abandonment.
      armBudget(at);
      const reason: CancelReason = { kind: "shutdown", at, message: `received ${signal}` };
      // The whole process shuts down: the other roots (run beside main) unwind alongside.
      for (const root of [task, ...otherLiveRoots(task)]) root.cancelFromOutside(reason);
    };
    const onSigint = () => onShutdownSignal("SIGINT");
    const onSigterm = () => onShutdownSignal("SIGTERM");
    const onSigusr2 = () => printTree("task tree (SIGUSR2):", "info");

    process.on("SIGINT", onSigint);
    process.on("SIGTERM", onSigterm);
    // Windows has no SIGUSR2; the dump is a diagnostic, so it is simply unavailable there.
    if (process.platform !== "win32") process.on("SIGUSR2", onSigusr2);

    const release = () => {
      process.off("SIGINT", onSigint);
      process.off("SIGTERM", onSigterm);
      process.off("SIGUSR2", onSigusr2);
      cancelBudget?.();
      settled = true;
      (closeInspect as (() => void) | null)?.();
      if (blockedStepMs !== null) setStepWatch(restoreStepWatch);
      cancelKeepAlive();
      runningMain = null;
    };

    /**
     * Exits with `code` once every other root has unwound: they are cancelled (reason `shutdown`)
     * and awaited within the shutdown budget, so no root's `finally` is cut off by the exit.
     */
    const exitWhenAlone = (code: number) => {
      const others = otherLiveRoots(task);
      if (others.length === 0) process.exit(code);
      if (!signalled) {
        const at = task.clock.now();
        armBudget(at);
        const reason: CancelReason = { kind: "shutdown", at, message: `main ${task.path} ended` };
        for (const root of others) root.cancelFromOutside(reason);
      }
      let pending = others.length;
      for (const root of others) root.whenSettled(() => --pending === 0 && process.exit(code));
    };

    task.onSettled(() => {
      const final = task.outcome!;
      if (final.state === "completed") {
        release();
        resolve();
        return;
      }
      if (final.state === "failed") {
        say("error", `${task.path} failed:`, describeError(final.error), { error: final.error });
        exitWhenAlone(1);
        return;
      }
      if (signalled) {
        exitWhenAlone(SIGNAL_EXIT_CODES[signalled]);
        return;
      }
      // Cancelled without a signal (the body threw a `Cancelled` it got from elsewhere): not a
      // success, and not a shutdown either.
      say("error", `${task.path} ended cancelled (${final.reason.kind})`);
      exitWhenAlone(1);
    });

    /**
     * A root waiting on nothing but a signal (`yield* suspend()`) holds no host handle, and Node
     * would exit under it. An open message port holds the loop without being a timer: it needs no
     * clock and never wakes the process, and closing it releases the loop at once.
     */
    function keepAlive(): () => void {
      const { port1 } = new MessageChannel();
      // Node's typings have `on("message")`, the DOM's `onmessage`; Node has both at run time, and
      // setting `onmessage` starts and refs the port. Typed by shape, so this file compiles with
      // `lib: ["DOM"]` as well (checked by packages/core/test/dom/tsconfig.json).
      (port1 as unknown as { onmessage: (() => void) | null }).onmessage = () => {};
      return () => port1.close();
    }
  });
}

/**
 * The error's stack, then its `cause` chain and every error attached to its `suppressed` (semantics
 * §2: errors are never dropped). Written without `node:util`, so the barrel stays loadable anywhere.
 */
function describeError(error: unknown, depth = 0): string {
  if (!(error instanceof Error)) return describeThrown(error);
  const lines = [error.stack ?? `${error.name}: ${error.message}`];
  // A cause chain can loop; a few levels say everything a human reads anyway.
  if (depth >= 8) return lines[0]!;
  if (error.cause !== undefined) lines.push(`caused by: ${indent(describeError(error.cause, depth + 1))}`);
  const suppressed = (error as { suppressed?: unknown }).suppressed;
  if (Array.isArray(suppressed))
    for (const later of suppressed) lines.push(`suppressed: ${indent(describeError(later, depth + 1))}`);
  return lines.join("\n");
}

function indent(text: string): string {
  return text.replace(/\n/g, "\n  ");
}
