/**
 * `all`: run operations concurrently and collect their values in input order.
 * @module
 */

import { invalidType } from "../errors.js";
import { BoundOp1, nameBody } from "./bound-op.js";
import { currentTask } from "./current.js";
import { exitFrame } from "./frame-exit.js";
import { type NotAPromise, notAPromise } from "./not-a-promise.js";
import {
  checkOps,
  type Op,
  type Operation,
  type OpValue,
  type Outcome,
  SuspensionClass,
  structuralWait,
  suspensionClass,
  type Waiter,
} from "./operation.js";
import { shapes } from "./shapes.js";
import { spawnInto } from "./spawn.js";
import type { TaskImpl } from "./task.js";

/**
 * The values of a tuple or array of operations, in order.
 *
 * @example
 * ```ts
 * import { type AllValues, all, run } from "@keel/core";
 * const ops = [function* count() { return 3; }, function* label() { return "items"; }] as const;
 * const values: AllValues<typeof ops> = await run(() => all(ops)); // [number, string]
 * console.log(values); // [3, "items"]
 * ```
 */
export type AllValues<T extends readonly Op<unknown>[]> = { -readonly [K in keyof T]: OpValue<T[K]> };

/**
 * Runs every operation as a child of a new scope and returns their values in input order.
 *
 * The first error cancels the others (reason `"child-failed"`), waits for their cleanup, then is
 * thrown unchanged, with later errors attached to its `suppressed`. Unlike `Promise.all` (and
 * asyncio's `gather`), nothing keeps running after `all` throws. `all([])` returns `[]` at once.
 *
 * @example
 * ```ts
 * import { all, run, sleep } from "@keel/core";
 * const [a, b] = await run(() => all([
 *   function* slow() { yield* sleep(30); return "a"; },
 *   function* fast() { yield* sleep(10); return 2; },
 * ]));
 * console.log(a, b); // "a" 2
 * ```
 * @throws `TypeError` when `ops` is not an array of operations.
 */
export function all<const T extends readonly Op<unknown>[]>(ops: T): Operation<AllValues<T>> & NotAPromise {
  if (!Array.isArray(ops)) throw invalidType("all(ops)", "an array of operations", ops);
  checkOps("all", ops);
  if (ops.length === 0) {
    return notAPromise(
      {
        *[Symbol.iterator]() {
          return [] as unknown as AllValues<T>;
        },
      },
      "all([])",
    );
  }
  return new BoundOp1(runAll, ops) as Operation<AllValues<T>> & NotAPromise;
}

function* runAll<T extends readonly Op<unknown>[]>(ops: T): Generator<unknown, AllValues<T>, unknown> {
  const task = yield* currentTask("all(ops)");
  task.checkpoint();
  const frame = task.pushFrame("all", `all(${ops.length})`);
  let outcome: Outcome<AllValues<T>>;
  try {
    const children = ops.map((op, i) =>
      spawnInto(frame, op, (typeof op === "function" && op.name) || `all[${i}]`),
    );
    yield new AllSettledWait(children);
    outcome = { ok: true, value: children.map((c) => childValue(c)) as AllValues<T> };
  } catch (error) {
    outcome = { ok: false, error };
  }
  return yield* exitFrame(task, frame, outcome);
}

const ALL_SETTLED: Outcome<void> = Object.freeze({ ok: true, value: undefined });

/**
 * The wait for every child of an `all` to settle. A class, not a literal: a literal's methods are new
 * closures each time, which the runtime's call into `enter` would see as a new target every call.
 */
class AllSettledWait extends SuspensionClass<void> {
  declare readonly interruptible: "normal";
  constructor(private readonly children: TaskImpl<unknown>[]) {
    super();
    shapes.allWait = this;
  }
  get description(): string {
    const children = this.children;
    return `all: ${children.filter((c) => !c.isSettled).length} of ${children.length} pending`;
  }
  enterWith(waiter: Waiter<void>): undefined {
    // One callback for every child, never unregistered: when the wait ends early (interrupted),
    // the children are cancelled and settle soon, and the runtime ignores a resolve that comes
    // after the task has left the wait.
    const children = this.children;
    let pending = children.length;
    const settled = () => {
      if (--pending === 0) waiter.resolve(ALL_SETTLED);
    };
    for (let i = 0; i < children.length; i++) children[i]!.whenSettled(settled);
    return undefined;
  }
}
structuralWait(AllSettledWait);
suspensionClass(AllSettledWait, "normal");

function childValue(child: TaskImpl<unknown>): unknown {
  const o = child.joinOutcome();
  if (!o.ok) throw o.error;
  return o.value;
}

// What an awaited one of these operations is called in its KEEL_OPERATION_AWAITED error.
nameBody(runAll, "all");
