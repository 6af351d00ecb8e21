/**
 * Access to the task that drives the calling operation.
 * @module
 */
import { KeelError } from "../errors.js";
import { CURRENT_TASK, type Instruction, iterate, type Op } from "./operation.js";
import { TaskImpl } from "./task.js";

/**
 * Checks what `yield CURRENT_TASK` answered: `const task = taskOf(yield CURRENT_TASK, api)` is the
 * cheap form of `yield* currentTask(api)` for hot operations (no nested generator).
 */
export function taskOf(answer: unknown, api: string): TaskImpl<unknown> {
  if (answer instanceof TaskImpl) return answer;
  throw new KeelError(
    "KEEL_NO_TASK",
    `${api}: must run inside a Keel task (yield* it from an operation, or run() it)`,
  );
}

/** Yields for the current task; throws `KEEL_NO_TASK` when driven by hand outside the runtime. */
export function* currentTask(api: string): Generator<Instruction, TaskImpl<unknown>, unknown> {
  const task = yield CURRENT_TASK;
  if (!(task instanceof TaskImpl)) {
    throw new KeelError(
      "KEEL_NO_TASK",
      `${api}: must run inside a Keel task (yield* it from an operation, or run() it)`,
    );
  }
  return task;
}

/** `yield* delegate(op)` runs `op` inline, calling it only now (so a scope that never enters never starts it). */
export function delegate<T>(op: Op<T>): { [Symbol.iterator](): Iterator<unknown, T, unknown> } {
  return { [Symbol.iterator]: () => iterate(op) };
}
