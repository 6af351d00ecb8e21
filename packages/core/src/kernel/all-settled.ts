/**
 * `allSettled`: run operations concurrently and collect every outcome, a cancellation excepted.
 * @module
 */

import { invalidType } from "../errors.js";
import { all } from "./all.js";
import { isCancelled } from "./cancelled.js";
import { currentTask, delegate } from "./current.js";
import type { NotAPromise } from "./not-a-promise.js";
import { checkOps, nameOf, type Op, type Operation, type OpValue } from "./operation.js";
import type { TaskImpl } from "./task.js";

/**
 * The settled results of a tuple or array of operations, in order.
 *
 * @example
 * ```ts
 * import { type AllSettledResults, allSettled, run } from "@keel/core";
 * const ops = [function* count() { return 3; }, function* broken(): Generator<never, string> { throw new Error("no"); }] as const;
 * const [count, label]: AllSettledResults<typeof ops> = await run(() => allSettled(ops));
 * console.log(count.status, label.status); // fulfilled rejected
 * ```
 */
export type AllSettledResults<T extends readonly Op<unknown>[]> = {
  -readonly [K in keyof T]: PromiseSettledResult<OpValue<T[K]>>;
};

/**
 * Runs every operation as a child of a new scope, waits for all of them, and returns each outcome in
 * input order as `Promise.allSettled` does: `{ status: "fulfilled", value }` or
 * `{ status: "rejected", reason }`. A failure does not cancel the others.
 *
 * A cancellation is never collected: cancelling the caller cancels every child, waits for their
 * cleanup, and ends `allSettled` with that cancellation, so no `try/catch` has to remember to rethrow
 * `Cancelled`. (An error thrown by a child's `finally` during that cancellation replaces it, as
 * everywhere.) A child that joins some other cancelled task gets an ordinary `TaskCancelledError`,
 * which is collected like any error.
 *
 * @example
 * ```ts
 * import { allSettled, run, sleep } from "@keel/core";
 * const results = await run(() => allSettled([
 *   function* fetchA() { yield* sleep(10); return "a"; },
 *   function* fetchB(): Generator<unknown, string> { yield* sleep(5); throw new Error("b is down"); },
 * ]));
 * console.log(results.map((r) => (r.status === "fulfilled" ? r.value : `failed: ${(r.reason as Error).message}`)));
 * // ["a", "failed: b is down"]
 * ```
 * @throws `TypeError` when `ops` is not an array of operations.
 */
export function allSettled<const T extends readonly Op<unknown>[]>(
  ops: T,
): Operation<AllSettledResults<T>> & NotAPromise {
  if (!Array.isArray(ops)) throw invalidType("allSettled(ops)", "an array of operations", ops);
  checkOps("allSettled", ops);
  const settling = ops.map((op, i) =>
    Object.defineProperty(() => settleChild(op), "name", { value: nameOf(op, `allSettled[${i}]`) }),
  );
  return all(settling) as unknown as Operation<AllSettledResults<T>> & NotAPromise;
}

function* settleChild<T>(op: Op<T>): Generator<unknown, PromiseSettledResult<T>, unknown> {
  const task = yield* currentTask("allSettled(ops)");
  return yield* settle(task, op);
}

/**
 * `yield* settle(task, op)`: `op`'s outcome as a settled result. A cancellation is rethrown, and so is
 * an error that arrives while `task` is being cancelled: it replaced the cancellation (a `finally`
 * that threw), so it goes where the cancellation would have gone, never into the results.
 */
export function* settle<R>(
  task: TaskImpl<unknown>,
  op: Op<R>,
): Generator<unknown, PromiseSettledResult<R>, unknown> {
  try {
    return { status: "fulfilled", value: yield* delegate(op) };
  } catch (reason) {
    if (isCancelled(reason) || task.requestCount > 0) throw reason;
    return { status: "rejected", reason };
  }
}
