/**
 * `shield`: work that must finish survives an outer cancellation, for a bounded time.
 * @module
 */

import { checkDurationMs, checkOptions, isTimeoutError } from "../errors.js";
import { BoundOp3, nameBody } from "../kernel/bound-op.js";
import { isCancelled } from "../kernel/cancelled.js";
import { currentTask } from "../kernel/current.js";
import type { NotAPromise } from "../kernel/not-a-promise.js";
import { checkOp, nameOf, type Op, type Operation, type Outcome } from "../kernel/operation.js";
import { spawnInto } from "../kernel/spawn.js";
import { BUDGET_KEY, CLEANUP_CAP_KEY, DEFAULT_CLEANUP_BUDGET_MS, type TaskImpl } from "../kernel/task.js";
import { timeoutScope } from "./timeout.js";

/**
 * Runs `op` in a child task that cancellation from outside the shield does not reach, bounded by
 * `limitMs` (default: the cleanup budget in force). Use it for a commit, a flush, a goodbye message.
 *
 * If the caller is cancelled while it waits, it keeps waiting until the shielded work settles, then
 * the cancellation is delivered right there (`yield* shield(…)` throws `Cancelled`); the work's error,
 * if any, is reported as an `error:suppressed` event, never lost. At `limitMs` the work is cancelled
 * (with its own cleanup budget) and the shield throws `TimeoutError`, or `Cancelled` when the caller
 * is itself being cancelled. The shielded task is owned by the caller's scope: never orphaned.
 *
 * **Time**: inside, the enclosing deadline does not apply; only `limitMs` does. Timeouts and cancels
 * made inside the shield work as usual.
 *
 * @example
 * ```ts
 * import { run, shield, sleep, suspend } from "@keel/core";
 * const worker = run(function* worker() {
 *   try { yield* suspend(); }
 *   finally { yield* shield(function* flush() { yield* sleep(50); console.log("flushed"); }, { limitMs: 1000 }); }
 * });
 * await worker.cancel(); // prints "flushed" first
 * ```
 * @throws `RangeError` for a negative, NaN or infinite `limitMs` (a shield is never unbounded).
 */
export function shield<T>(op: Op<T>, options?: { limitMs?: number }): Operation<T> & NotAPromise {
  checkOp("shield(op)", op);
  const limitOption = checkOptions("shield(op, options)", options)?.limitMs;
  if (limitOption !== undefined) checkDurationMs("shield(op, { limitMs })", limitOption, false);
  const name = `shield(${nameOf(op, "op")})`;
  return new BoundOp3(runShielded, op, limitOption, name) as Operation<T> & NotAPromise;
}

/** The limit (an instant) of the innermost shield whose work is running here: shield limits nest. */
const SHIELD_LIMIT_KEY: unique symbol = Symbol("keel.shield-limit");

/**
 * Semantics §6: a shield inside a shield's work gets at most what is left of the enclosing limit,
 * so nested shields cannot outlast the outermost one. While the task runs its own cleanup, the
 * enclosing limit may already have passed: a shield there may then reach the cleanup deadline
 * (itself at most one budget after the enclosing limit), as any scope opened during cleanup does.
 */
function nestedLimitAt(task: TaskImpl<unknown>, enclosing: number | undefined, own: number): number {
  if (enclosing === undefined) return own;
  const cap = task.isCancelling ? Math.max(enclosing, task.effectiveDeadline()) : enclosing;
  return Math.min(own, cap);
}

/**
 * The latest instant any cleanup inside the shield may end (semantics §6): its limit plus one
 * cleanup budget, within an enclosing shield's. The kernel caps every unwinding in the work's
 * subtree there (`CLEANUP_CAP_KEY`). Without it each level of a chain (a cut cancels shielded work
 * whose `finally` enters the next shield) started a fresh budget where the last one ended: five
 * levels below the caller's shield settled three budgets past the outermost limit plus one budget.
 */
function cleanupCapAt(contexts: Record<symbol, unknown>, limitAt: number, budgetMs: number): number {
  const enclosing = contexts[CLEANUP_CAP_KEY] as number | undefined;
  const own = limitAt + budgetMs;
  return enclosing === undefined ? own : Math.min(own, enclosing);
}

function* runShielded<T>(
  op: Op<T>,
  limitOption: number | undefined,
  name: string,
): Generator<unknown, T, unknown> {
  const task = yield* currentTask(name);
  task.checkpoint();
  const frame = task.top;
  const contexts = frame.contexts;
  const budgetMs = (contexts[BUDGET_KEY] as number | undefined) ?? DEFAULT_CLEANUP_BUDGET_MS;
  const limitMs = limitOption ?? budgetMs;
  const now = task.clock.now();
  const limitAt = nestedLimitAt(task, contexts[SHIELD_LIMIT_KEY] as number | undefined, now + limitMs);
  const label = `${name} limit ${Math.max(0, limitAt - now)} ms`;
  // The work's whole life (its root frame and every task it spawns) is inside the limit and the cap.
  const childContexts = Object.create(contexts, {
    [SHIELD_LIMIT_KEY]: { value: limitAt, enumerable: true },
    [CLEANUP_CAP_KEY]: { value: cleanupCapAt(contexts, limitAt, budgetMs), enumerable: true },
  });
  const child = spawnInto(
    frame,
    timeoutScope(op, label, () => limitAt),
    nameOf(op, "shielded"),
    {
      shielded: true,
      deadline: Infinity,
      contexts: childContexts,
    },
  );
  try {
    yield {
      kind: "suspend",
      description: `${name}: waiting for ${child.name}#${child.id}`,
      interruptible: "shield",
      limitAt,
      enter: (resolve: (o: Outcome<void>) => void) =>
        child.onSettled(() => resolve({ ok: true, value: undefined })),
    };
  } catch (e) {
    if (isCancelled(e)) {
      const f = child.outcome;
      if (!f) {
        // Only a cleanup-budget cut interrupts a shield: the work is cancelled now, and the
        // caller's scope still waits for it, so it is never orphaned.
        child.cancelFromOutside(e.reason);
        child.onSettled(() => {
          const late = child.outcome;
          if (late?.state === "failed") {
            task.emit({
              type: "error:suppressed",
              error: late.error,
              primary: e,
              context: `${name}: the shielded work failed after a cleanup cut`,
            });
          }
        });
      } else {
        task.emit({
          type: "shield:delay",
          delayedMs: Math.max(0, task.clock.now() - e.reason.at),
          reason: e.reason,
        });
        if (f.state === "failed") {
          task.emit({
            type: "error:suppressed",
            error: f.error,
            primary: e,
            context: `${name}: the shielded work failed while the caller was cancelled`,
          });
        }
      }
    }
    throw e;
  }
  const f = child.outcome!;
  if (f.state === "completed") return f.value as T;
  const o = child.joinOutcome();
  const inFlight = task.isCancelling ? task.inFlightCancelled() : null;
  if (inFlight && isTimeoutError(o.ok ? undefined : o.error)) {
    task.emit({
      type: "error:suppressed",
      error: (o as { error: unknown }).error,
      primary: inFlight,
      context: `${name}: limit reached during cleanup`,
    });
    throw inFlight;
  }
  throw (o as { error: unknown }).error;
}

// What an awaited one of these operations is called in its KEEL_OPERATION_AWAITED error.
nameBody(runShielded, "shield");
