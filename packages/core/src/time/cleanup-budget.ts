/**
 * `withCleanupBudget`: how long unwinding may take in a region.
 * @module
 */
import { checkDurationMs } from "../errors.js";
import { withContextValue } from "../kernel/context.js";
import { checkOp, type Op, type Operation } from "../kernel/operation.js";
import { BUDGET_KEY } from "../kernel/task.js";

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
export function withCleanupBudget<T>(ms: number, op: Op<T>): Operation<T> {
  checkDurationMs("withCleanupBudget(ms)", ms, false);
  checkOp("withCleanupBudget(ms, op)", op);
  return withContextValue(BUDGET_KEY, ms, op);
}
