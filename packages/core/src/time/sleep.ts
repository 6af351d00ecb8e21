/**
 * `sleep`: wait for a duration on the runtime's clock.
 * @module
 */
import { checkDurationMs } from "../errors.js";
import { BoundOp1 } from "../kernel/bound-op.js";
import type { Clock } from "../kernel/clock.js";
import { taskOf } from "../kernel/current.js";
import { CURRENT_TASK, type Operation, type Outcome, type Waiter } from "../kernel/operation.js";
import { CLOCK_KEY, runningTask } from "../kernel/task.js";

const SLEPT: Outcome<void> = Object.freeze({ ok: true, value: undefined });

/**
 * Waits `ms` milliseconds on the runtime's clock (virtual in tests). `sleep(Infinity)` waits until
 * cancelled.
 *
 * **Cancellation**: a suspension point; cancelling removes its timer.
 *
 * @example
 * ```ts
 * import { now, run, sleep } from "@keel/core";
 * await run(function* tick() { const t0 = yield* now(); yield* sleep(20); console.log((yield* now()) - t0 >= 20); });
 * ```
 * @throws `RangeError` for a negative or NaN `ms`, at the call.
 */
export function sleep(ms: number): Operation<void> {
  checkDurationMs("sleep(ms)", ms);
  return new BoundOp1(sleepFor, ms);
}

function* sleepFor(ms: number): Generator<unknown, void, unknown> {
  const task = runningTask() ?? taskOf(yield CURRENT_TASK, "sleep(ms)");
  const clock = task.top.contexts[CLOCK_KEY] as Clock;
  const at = clock.now() + ms;
  yield {
    kind: "suspend",
    description: `sleep(${ms})`,
    interruptible: "normal",
    enter: (resolve: (o: Outcome<void>) => void) =>
      at === Infinity ? undefined : clock.schedule(at, () => resolve(SLEPT)),
    enterWith: (waiter: Waiter<void>) =>
      at === Infinity ? undefined : clock.schedule(at, () => waiter.resolve(SLEPT)),
  };
}
