/**
 * `withCleanupBudget` and `cleanupBudget`: how long unwinding may take in a region.
 * @module
 */

import { checkDurationMs } from "../errors.js";
import { withContextValue } from "../kernel/context.js";
import { currentTask } from "../kernel/current.js";
import { type NotAPromise, notAPromise } from "../kernel/not-a-promise.js";
import { checkOp, type Op, type Operation } from "../kernel/operation.js";
import { BUDGET_KEY, DEFAULT_CLEANUP_BUDGET_MS } from "../kernel/task.js";

/**
 * Runs `op` with a cleanup budget of `ms`: when a cancellation is delivered inside it, its `finally`
 * blocks may suspend for up to `ms` before the pending step is cut (semantics §5). Children spawned
 * inside inherit it.
 *
 * @example
 * ```ts
 * import { run, suspend, withCleanupBudget } from "@keel/core";
 * const t = run(() => withCleanupBudget(200, function* worker() {
 *   try { yield* suspend(); } finally { yield* suspend(); } // a hung cleanup: cut after 200 ms
 * }), { onEvent: () => {} });
 * await t.cancel();
 * ```
 * @throws `RangeError` for a negative, NaN or infinite `ms` (semantics §5: cleanup is always bounded).
 */
export function withCleanupBudget<T>(ms: number, op: Op<T>): Operation<T> & NotAPromise {
  checkDurationMs("withCleanupBudget(ms)", ms, false);
  checkOp("withCleanupBudget(ms, op)", op);
  return withContextValue(BUDGET_KEY, ms, op);
}

/**
 * The cleanup budget in force where the caller runs: the innermost {@link withCleanupBudget}
 * region's, else the runtime's (`run(op, { cleanupBudgetMs })` or `main`'s; 5,000 ms by default).
 * For code that bounds an unwinding of its own as the runtime would bound the caller's (a worker's
 * cut jobs, by default).
 *
 * @example
 * ```ts
 * import { cleanupBudget, run, withCleanupBudget } from "@keel/core";
 * console.log(await run(cleanupBudget)); // 5000
 * console.log(await run(cleanupBudget, { cleanupBudgetMs: 250 })); // 250
 * console.log(await run(() => withCleanupBudget(40, cleanupBudget))); // 40
 * ```
 */
export function cleanupBudget(): Operation<number> & NotAPromise {
  return CLEANUP_BUDGET_OP;
}

// One operation for every caller (operations are re-runnable): no generator function per call.
const CLEANUP_BUDGET_OP: Operation<number> & NotAPromise = notAPromise(
  {
    *[Symbol.iterator]() {
      const task = yield* currentTask("cleanupBudget()");
      return (task.top.contexts[BUDGET_KEY] as number | undefined) ?? DEFAULT_CLEANUP_BUDGET_MS;
    },
  },
  "cleanupBudget()",
);
