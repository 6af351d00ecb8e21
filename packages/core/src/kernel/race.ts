/**
 * `race`: the first operation to settle wins; the rest are cancelled and awaited.
 * @module
 */

import { invalidRange, invalidType } from "../errors.js";
import { BoundOp1, nameBody } from "./bound-op.js";
import type { CancelReason } from "./cancelled.js";
import { currentTask } from "./current.js";
import { exitFrame } from "./frame-exit.js";
import type { NotAPromise } from "./not-a-promise.js";
import { checkOps, type Op, type Operation, type OpValue, type Outcome } from "./operation.js";
import { spawnInto } from "./spawn.js";
import type { TaskImpl } from "./task.js";

/**
 * Runs every operation as a child of a new scope; the first to settle, with a value or an error,
 * wins. The others are cancelled at once (reason `"race-lost"`) and awaited before `race` returns, so
 * a loser's cleanup always finishes first. Same-instant results resolve by registration order.
 *
 * @example
 * ```ts
 * import { race, run, sleep } from "@keel/core";
 * const winner = await run(() => race([
 *   function* primary() { yield* sleep(50); return "primary"; },
 *   function* hedge() { yield* sleep(20); return "hedge"; },
 * ]));
 * console.log(winner); // "hedge"
 * ```
 * @throws `RangeError` for an empty list (nothing could ever win); `TypeError` for non-operations.
 */
export function race<const T extends readonly Op<unknown>[]>(
  ops: T,
): Operation<OpValue<T[number]>> & NotAPromise {
  if (!Array.isArray(ops)) throw invalidType("race(ops)", "an array of operations", ops);
  if (ops.length === 0) throw invalidRange("race(ops)", "at least one operation", "[]");
  checkOps("race", ops);
  return new BoundOp1(runRace, ops) as Operation<OpValue<T[number]>> & NotAPromise;
}

function* runRace<T extends readonly Op<unknown>[]>(ops: T): Generator<unknown, OpValue<T[number]>, unknown> {
  const task = yield* currentTask("race(ops)");
  task.checkpoint();
  const frame = task.pushFrame("race", `race(${ops.length})`);
  let winner: TaskImpl<unknown> | null = null;
  let wake: (() => void) | null = null;
  let remaining = ops.length;
  frame.policy = {
    onChildSettled(child) {
      remaining--;
      const f = child.outcome!;
      if (!winner && f.state !== "cancelled") {
        winner = child;
        if (f.state === "failed") frame.recordError(f.error);
        const reason: CancelReason = {
          kind: "race-lost",
          at: task.clock.now(),
          scope: frame.info,
          message: `${child.name} won`,
        };
        for (const other of [...(frame.children ?? [])]) other.cancelFromOutside(reason);
        wake?.();
      } else if (f.state === "failed") {
        frame.recordError(f.error);
      }
      if (remaining === 0) wake?.();
    },
  };
  let outcome: Outcome<OpValue<T[number]>>;
  try {
    const children = ops.map((op, i) =>
      spawnInto(frame, op, (typeof op === "function" && op.name) || `race[${i}]`),
    );
    yield {
      kind: "suspend" as const,
      description: `race: ${children.length} running`,
      interruptible: "normal",
      structural: true,
      enter(resolve: (o: Outcome<void>) => void) {
        wake = () => resolve({ ok: true, value: undefined });
        return () => {
          wake = null;
        };
      },
    };
    const w = winner as TaskImpl<unknown> | null;
    const o = w ? w.joinOutcome() : children[children.length - 1]!.joinOutcome();
    // A failed winner's error is already the frame's primary error; exitFrame throws it.
    outcome = o.ok
      ? { ok: true, value: o.value as OpValue<T[number]> }
      : w
        ? { ok: true, value: undefined as never }
        : o;
  } catch (error) {
    outcome = { ok: false, error };
  }
  return yield* exitFrame(task, frame, outcome);
}

// What an awaited one of these operations is called in its KEEL_OPERATION_AWAITED error.
nameBody(runRace, "race");
