/**
 * Wait guards and eviction (semantics §10): the hooks a runtime built on Keel needs to replay
 * operations (`@keel/workflow`). Few programs call them directly.
 *
 * A **wait guard** sees every wait a task makes inside `guardWaits(guard, op)`, children included,
 * but the kernel's structural ones (a join, a scope waiting for its children, `all`, `race`), and
 * may refuse it: the refusal is thrown at the `yield*` that asked for the wait. It also hears of
 * every task spawned inside, in spawn order, which is the program's order (a replay of the same
 * code spawns the same tasks in the same order, whatever order they finish in).
 *
 * **Eviction** drops a task's subtree without resuming any generator: no `finally` runs. It is
 * for a subtree whose unwinding happens in a later incarnation (a durable workflow parked until
 * next week, or handed to another process at a shutdown), never for ordinary work.
 * @module
 */
import { invalidType } from "../errors.js";
import type { CancelReason } from "./cancelled.js";
import { withContextValue } from "./context.js";
import { currentTask } from "./current.js";
import { type NotAPromise, notAPromise } from "./not-a-promise.js";
import { checkOp, nameOf, type Op, type Operation, type WaitGuard } from "./operation.js";
import { whenDrained as onDrained } from "./scheduler.js";
import { spawnInto } from "./spawn-into.js";
import type { Task } from "./task.js";
import { TaskImpl, WAIT_GUARD_KEY } from "./task.js";

/**
 * Runs `op` with `guard` seeing its waits (see the module's comment); `guardWaits(null, op)` runs
 * `op` with no guard, inside a guarded region (a durable workflow's step).
 *
 * @example
 * ```ts
 * import { guardWaits, run, sleep } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const seen: string[] = [];
 * await run(() => guardWaits({ check: (w) => void seen.push(w.description) }, sleep(5)), { clock: createVirtualClock() });
 * console.log(seen); // ["sleep(5)"]
 * ```
 */
export function guardWaits<T>(guard: WaitGuard | null, op: Op<T>): Operation<T> & NotAPromise {
  if (guard !== null && (typeof guard !== "object" || typeof guard.check !== "function"))
    throw invalidType("guardWaits(guard)", "null or an object with a check(wait) method", guard);
  checkOp("guardWaits(op)", op);
  return withContextValue(WAIT_GUARD_KEY, guard, op);
}

/**
 * Drops `task` and its subtree without resuming any generator (see the module's comment): every
 * task settles `cancelled` with reason kind `"evicted"`, children first; no `finally` runs. End
 * first any task of the subtree whose own cleanup must run.
 *
 * @example
 * ```ts
 * import { evict, run, spawn, suspend } from "@keel/core";
 * await run(function* () {
 *   const parked = yield* spawn(function* () {
 *     try { yield* suspend(); } finally { console.log("never printed"); }
 *   });
 *   evict(parked, "parked until tomorrow");
 *   console.log(parked.state); // cancelled
 * });
 * ```
 */
export function evict(task: Task<unknown>, message: string): void {
  if (!(task instanceof TaskImpl)) throw invalidType("evict(task)", "a Keel task", task);
  const reason: CancelReason = { kind: "evicted", at: task.clock.now(), message };
  task.evict(reason);
}

/**
 * Spawns `op` as a child that the caller's cancellation does not reach (as a resource's task):
 * the caller ends it itself, by joining it or by {@link evict}ing it, typically in a `finally`
 * that runs when the caller is cancelled (a workflow engine hands a parked or interrupted body back
 * without running its `finally` blocks). If it is still live when the caller's scope exits, it is
 * cancelled then, after the scope's other children.
 *
 * @example
 * ```ts
 * import { evict, run, sleep, spawn, spawnEvictable, suspend } from "@keel/core";
 * await run(function* () {
 *   const runner = yield* spawn(function* () {
 *     const body = yield* spawnEvictable(function* () {
 *       try { yield* suspend(); } finally { console.log("not printed: evicted, not cancelled"); }
 *     });
 *     try { yield* body; } finally { evict(body, "handed back"); console.log(body.state); } // cancelled
 *   });
 *   yield* sleep(1);
 *   yield* runner.cancel();
 * });
 * ```
 */
export function spawnEvictable<T>(
  op: Op<T>,
  options: { name?: string } = {},
): Operation<Task<T>> & NotAPromise {
  checkOp("spawnEvictable(op)", op);
  if (typeof options !== "object" || options === null)
    throw invalidType("spawnEvictable(op, options)", "an object", options);
  const name = options.name ?? nameOf(op, "evictable");
  if (typeof name !== "string") throw invalidType("spawnEvictable(op, { name })", "a string", name);
  return notAPromise(
    {
      *[Symbol.iterator]() {
        const task = yield* currentTask("spawnEvictable(op)");
        return spawnInto(task.top, op, name, { resource: true }) as Task<T>;
      },
    },
    "spawnEvictable(op)",
  );
}

/**
 * Calls `fn` once the runtime's run queue is empty: every task that could run has run to its next
 * wait. For a replaying runtime that must let every branch reach its next request before it answers
 * one (a workflow replays its journal in the order it was written).
 *
 * @example
 * ```ts
 * import { run, spawn, whenDrained } from "@keel/core";
 * const order: string[] = [];
 * await run(function* () {
 *   whenDrained(() => order.push("drained"));
 *   const child = yield* spawn(function* child() { order.push("child ran"); });
 *   yield* child;
 * });
 * console.log(order); // ["child ran", "drained"]
 * ```
 */
export function whenDrained(fn: () => void): void {
  if (typeof fn !== "function") throw invalidType("whenDrained(fn)", "a function", fn);
  onDrained(fn);
}
