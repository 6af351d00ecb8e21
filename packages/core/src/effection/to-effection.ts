/**
 * `toEffection`: a Keel operation run from effection code.
 * @module
 */
import type { Effect, Operation as EffectionOperation, Result } from "effection";
import { checkDurationMs } from "../errors.js";
import { checkOp, nameOf, type Op, type Outcome } from "../kernel/operation.js";
import { BUDGET_KEY, TaskImpl } from "../kernel/task.js";
import { run } from "../run.js";
import { type KeelEnv, KeelEnvContext } from "./env.js";

/**
 * Runs a Keel operation as an effection operation: a Keel task whose value it gives, or whose error
 * it throws unchanged (a Keel `TimeoutError` stays a `TimeoutError`).
 *
 * **Cancellation**: halting the effection task cancels the Keel task: `Cancelled` is thrown at its
 * suspension point, its `finally` blocks run (async cleanup allowed, at any depth of `yield*`) under
 * the cleanup budget, and effection's halt waits until the Keel task has unwound. The order is the
 * stack's: the Keel operation unwinds completely before the `finally` blocks of the effection code
 * that called it run, as for any operation the caller `yield*`s. The wait is the exit of the
 * effection effect the caller is suspended at, which effection completes before it resumes the
 * caller's generator, so the wrapper has no `finally` of its own (a yielding `finally` in a
 * `yield*`-delegated frame loses the halt: effection issues #1190, #1154).
 *
 * **Time**: inside `fromEffection`, the Keel task runs on the outer Keel clock, under the deadline in
 * force there, with its cleanup budget (unless `cleanupBudgetMs` says otherwise) and its contexts,
 * and reports to the same event stream; a Keel `timeout` outside still bounds it. Elsewhere it is a
 * root task on the real clock (default cleanup budget 5000 ms).
 *
 * @example
 * ```ts
 * import { sleep } from "@keel/core";
 * import { toEffection } from "@keel/core/effection";
 * import { run } from "effection";
 * const v = await run(() => toEffection(function* fetchAnswer() { yield* sleep(5); return 42; }));
 * console.log(v); // 42
 * ```
 * @throws `TypeError` when `op` is not an operation; `RangeError` for a bad `cleanupBudgetMs`.
 */
export function toEffection<T>(op: Op<T>, options: { cleanupBudgetMs?: number } = {}): EffectionOperation<T> {
  checkOp("toEffection(op)", op);
  const budgetMs = options.cleanupBudgetMs;
  if (budgetMs !== undefined) checkDurationMs("toEffection(op, { cleanupBudgetMs })", budgetMs, false);
  const name = nameOf(op, "keel");
  return {
    // No `finally` in this frame: it is `yield*`-delegated by its caller, and a `finally` that
    // yields there would let the caller run on after a halt.
    *[Symbol.iterator]() {
      const env = yield* KeelEnvContext.get();
      const outcome = (yield keelTaskEffect(op, name, env ?? null, budgetMs)) as Outcome<T>;
      if (outcome.ok) return outcome.value;
      throw outcome.error;
    },
  };
}

/**
 * The effect the effection caller waits at while the Keel task runs. It resolves with the Keel
 * outcome as a value (thrown by the wrapper's frame, so it reaches the caller's `yield*` unchanged).
 * Its exit, which effection calls whenever the caller leaves the effect and awaits before the caller
 * steps again, is where a halt cancels the Keel task and waits for it: so Keel unwinds before any
 * `finally` of the caller runs. An error thrown by Keel's cleanup then resumes the caller with that
 * error, as one thrown by an effection `finally` would be.
 */
function keelTaskEffect<T>(
  op: Op<T>,
  name: string,
  env: KeelEnv | null,
  budgetMs: number | undefined,
): Effect<Outcome<T>> {
  return {
    description: `keel ${name}`,
    enter(resolve) {
      const task = startKeelTask(op, name, env, budgetMs);
      // The Keel task runs on the outer clock: its timers are the runtime's own, so autojump may move.
      let retake = env?.pauseHold();
      const done = () => {
        retake?.();
        retake = undefined;
      };
      task.whenSettled(() => {
        done();
        resolve({ ok: true, value: task.joinOutcome() });
      });
      return (exited) => {
        if (task.isSettled) {
          exited({ ok: true, value: undefined });
          return;
        }
        task.cancel("halted by effection");
        task.whenSettled(() => {
          done();
          const f = task.outcome;
          exited(
            f?.state === "failed"
              ? ({ ok: false, error: f.error } as Result<void>)
              : { ok: true, value: undefined },
          );
        });
      };
    },
  };
}

function startKeelTask<T>(
  op: Op<T>,
  name: string,
  env: KeelEnv | null,
  budgetMs: number | undefined,
): TaskImpl<T> {
  if (!env) {
    const task = run(op, {
      name,
      ...(budgetMs === undefined ? {} : { cleanupBudgetMs: budgetMs }),
    }) as TaskImpl<T>;
    // Its outcome goes to the effection caller, which reports a failure.
    task.markHandled();
    return task;
  }
  const contexts =
    budgetMs === undefined
      ? env.contexts
      : Object.create(env.contexts, { [BUDGET_KEY]: { value: budgetMs, enumerable: true } });
  return new TaskImpl(op, {
    name,
    parent: env.task,
    owner: null,
    runtime: env.task.runtime,
    contexts,
    deadline: env.deadline,
  }).start();
}
