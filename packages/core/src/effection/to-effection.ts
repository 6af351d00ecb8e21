/**
 * `toEffection`: a Keel operation run from effection code.
 * @module
 */
import { action, type Effect, type Operation as EffectionOperation, spawn } from "effection";
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
 * the cleanup budget, and effection's halt waits until the Keel task has unwound. The Keel task is
 * held by an effection task of its own whose top-level `finally` does that waiting, so the wrapper
 * never puts a yielding `finally` in a `yield*`-delegated frame (effection issues #1190, #1154,
 * where such a frame loses the halt).
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
      const holder = yield* spawn(() => holdKeelTask(op, name, env ?? null, budgetMs));
      const outcome = yield* holder;
      if (outcome.ok) return outcome.value;
      throw outcome.error;
    },
  };
}

/**
 * The effection task that owns the Keel task. It returns the Keel outcome as a value rather than
 * throwing it (a spawned task's error would crash the caller's scope from the side instead of
 * reaching the caller's `yield*`); when halted, its top-level `finally` cancels the Keel task and
 * waits for it.
 */
function* holdKeelTask<T>(
  op: Op<T>,
  name: string,
  env: KeelEnv | null,
  budgetMs: number | undefined,
): Generator<Effect<unknown>, Outcome<T>, unknown> {
  const task = startKeelTask(op, name, env, budgetMs);
  // The Keel task runs on the outer clock: its timers are the runtime's own, so autojump may move.
  const retake = env?.pauseHold();
  try {
    yield* settled(task, `keel ${task.path}`);
    return task.joinOutcome();
  } finally {
    const halted = !task.isSettled;
    if (halted) {
      task.cancel("halted by effection");
      yield* settled(task, `keel ${task.path}: cancelling`);
    }
    retake?.();
    // An error thrown by Keel's cleanup (it beats the cancellation) is thrown from here, so that
    // effection's halt rejects with it, as it does for an error thrown by an effection `finally`.
    const f = task.outcome;
    // biome-ignore lint/correctness/noUnsafeFinally: only when halted, replacing effection's return.
    if (halted && f?.state === "failed") throw f.error;
  }
}

function settled(task: TaskImpl<unknown>, description: string): EffectionOperation<void> {
  return action<void>((resolve) => task.onSettled(() => resolve()), description);
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
