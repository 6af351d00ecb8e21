/**
 * `sleep`: wait for a duration on the runtime's clock.
 * @module
 */

import { checkDurationMs } from "../errors.js";
import { roundMs } from "../format-value.js";
import { BoundOp1, nameBody } from "../kernel/bound-op.js";
import type { Clock } from "../kernel/clock.js";
import { taskOf } from "../kernel/current.js";
import type { NotAPromise } from "../kernel/not-a-promise.js";
import {
  CURRENT_TASK,
  type Operation,
  type Outcome,
  SuspensionClass,
  suspensionClass,
  type WaitDetail,
  type Waiter,
} from "../kernel/operation.js";
import { shapes } from "../kernel/shapes.js";
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
export function sleep(ms: number): Operation<void> & NotAPromise {
  checkDurationMs("sleep(ms)", ms);
  return new BoundOp1(sleepFor, ms);
}

function* sleepFor(ms: number): Generator<unknown, void, unknown> {
  const task = runningTask() ?? taskOf(yield CURRENT_TASK, "sleep(ms)");
  const clock = task.top.contexts[CLOCK_KEY] as Clock;
  yield new SleepWait(clock, clock.now() + ms, ms);
}

/**
 * The wait of one `sleep`. A class, not a literal: a literal's methods are new closures each call,
 * and its description string would be built even when nobody prints the tree.
 */
class SleepWait extends SuspensionClass<void> {
  declare readonly interruptible: "normal";
  constructor(
    private readonly clock: Clock,
    private readonly at: number,
    private readonly ms: number,
  ) {
    super();
    shapes.sleepWait = this;
  }
  get description(): string {
    return `sleep(${roundMs(this.ms)})`;
  }
  waitDetail(): WaitDetail {
    return { kind: "sleep", ms: this.ms, until: this.at };
  }
  enterWith(waiter: Waiter<void>): (() => void) | undefined {
    return this.at === Infinity ? undefined : this.clock.schedule(this.at, () => waiter.resolve(SLEPT));
  }
}
suspensionClass(SleepWait, "normal");

// What an awaited one of these operations is called in its KEEL_OPERATION_AWAITED error.
nameBody(sleepFor, "sleep");
