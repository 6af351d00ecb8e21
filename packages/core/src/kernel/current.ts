/**
 * Access to the task that drives the calling operation.
 * @module
 */
import { KeelError } from "../errors.js";
import { type NotAPromise, notAPromise } from "./not-a-promise.js";
import { ASK_TASK, type Instruction, iterate, type Op, type Operation } from "./operation.js";
import { shapes } from "./shapes.js";
import { runningTask, type Task, TaskImpl } from "./task.js";

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

/**
 * `yield* currentTask(api)`: the current task. Inside a task's step it is known at once (no round
 * trip through the driver); otherwise it yields `CURRENT_TASK`, and throws `KEEL_NO_TASK` when the
 * answer is not a task (an operation driven by hand outside the runtime).
 */
export function currentTask(api: string): Iterable<Instruction, TaskImpl<unknown>, unknown> {
  return runningTask() ? RUNNING_NOW : new AskForTask(api);
}

/** Shared: `yield*` calls `next()` at once, in the same step that saw a running task. */
const RUNNING_NOW: Iterable<Instruction, TaskImpl<unknown>, unknown> &
  Iterator<Instruction, TaskImpl<unknown>, unknown> = {
  [Symbol.iterator]() {
    return this;
  },
  next() {
    return { done: true, value: runningTask() as TaskImpl<unknown> };
  },
};

class AskForTask
  implements
    Iterable<Instruction, TaskImpl<unknown>, unknown>,
    Iterator<Instruction, TaskImpl<unknown>, unknown>
{
  private asked = false;
  constructor(private readonly api: string) {
    shapes.askForTask = this;
  }
  [Symbol.iterator](): this {
    return this;
  }
  next(answer?: unknown): IteratorResult<Instruction, TaskImpl<unknown>> {
    if (this.asked) return { done: true, value: taskOf(answer, this.api) };
    this.asked = true;
    return ASK_TASK;
  }
}

/** `yield* delegate(op)` runs `op` inline, calling it only now (so a scope that never enters never starts it). */
export function delegate<T>(op: Op<T>): { [Symbol.iterator](): Iterator<unknown, T, unknown> } {
  return new Delegated(op);
}

/** A class rather than a literal with an arrow: one small object per scope entered, no closure. */
class Delegated<T> {
  constructor(private readonly op: Op<T>) {
    shapes.delegated = this;
  }
  [Symbol.iterator](): Iterator<unknown, T, unknown> {
    return iterate(this.op);
  }
}

/**
 * The task running the calling operation: for runtimes built on Keel that key their own state by
 * task (`@keel/workflow` keys a workflow's branches by the task that runs each).
 *
 * @example
 * ```ts
 * import { run, spawn, useTask } from "@keel/core";
 * await run(function* parent() {
 *   const child = yield* spawn(function* worker() { return (yield* useTask()).name; });
 *   console.log((yield* useTask()).name, yield* child); // parent worker
 * });
 * ```
 */
export function useTask(): Operation<Task<unknown>> & NotAPromise {
  return USE_TASK;
}

const USE_TASK = notAPromise(
  {
    *[Symbol.iterator](): Generator<Instruction, Task<unknown>, unknown> {
      return yield* currentTask("useTask()");
    },
  },
  "useTask()",
);
