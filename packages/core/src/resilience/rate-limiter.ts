/**
 * `createRateLimiter`: a token bucket; `take()` waits for a token, in FIFO order.
 * @module
 */

import { invalidRange } from "../errors.js";
import type { Clock } from "../kernel/clock.js";
import { currentTask } from "../kernel/current.js";
import { type NotAPromise, notAPromise } from "../kernel/not-a-promise.js";
import type { Operation } from "../kernel/operation.js";
import { CLOCK_KEY } from "../kernel/task.js";
import { park } from "./park.js";

/**
 * A token bucket.
 *
 * @example
 * ```ts
 * import { createRateLimiter, now, type RateLimiter, run } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * function* sendAll(limiter: RateLimiter, count: number) {
 *   const sentAt: number[] = [];
 *   for (let i = 0; i < count; i++) { yield* limiter.take(); sentAt.push(yield* now()); }
 *   return sentAt;
 * }
 * const limiter = createRateLimiter({ perSecond: 10, burst: 2 });
 * console.log(await run(() => sendAll(limiter, 5), { clock: createVirtualClock() })); // [0, 0, 100, 200, 300]
 * ```
 */
export interface RateLimiter {
  readonly perSecond: number;
  readonly burst: number;
  /** Tasks waiting for a token. */
  readonly waiting: number;
  /** Waits for a token (a suspension point); a cancelled waiter consumes none. */
  take(): Operation<void>;
}

interface Waiter {
  granted: boolean;
  wake: (() => void) | null;
  clock: Clock;
}

/**
 * Creates a token bucket that refills `perSecond` tokens a second up to `burst` (default 1). It
 * starts full, so a new limiter allows a burst at once. Waiters are served in order; the limiter
 * arms a timer only while someone waits, on the waiting task's clock.
 *
 * @example
 * ```ts
 * import { createRateLimiter, now, run } from "@keel/core";
 * const limiter = createRateLimiter({ perSecond: 100, burst: 2 });
 * await run(function* () { for (let i = 0; i < 3; i++) yield* limiter.take(); });
 * console.log(limiter.waiting); // 0
 * ```
 * @throws `RangeError` naming `perSecond` or `burst` for values that are not positive (burst: whole).
 */
export function createRateLimiter(options: {
  perSecond: number;
  burst?: number;
  name?: string;
}): RateLimiter {
  const perSecond = options?.perSecond;
  if (typeof perSecond !== "number" || !Number.isFinite(perSecond) || perSecond <= 0) {
    throw invalidRange("createRateLimiter({ perSecond })", "a finite number > 0", perSecond);
  }
  const burst = options.burst ?? 1;
  if (typeof burst !== "number" || !Number.isInteger(burst) || burst < 1) {
    throw invalidRange("createRateLimiter({ burst })", "a whole number ≥ 1", burst);
  }
  const name = options.name ?? "rate limiter";
  const msPerToken = 1000 / perSecond;
  let tokens = burst;
  let updatedAt: number | null = null;
  const queue: Waiter[] = [];
  let cancelTimer: (() => void) | null = null;

  // Invariant: tokens ≤ burst; refilled lazily from the clock, never by a timer.
  const refill = (at: number) => {
    if (updatedAt === null) updatedAt = at;
    tokens = Math.min(burst, tokens + (at - updatedAt) / msPerToken);
    updatedAt = at;
  };

  const serve = () => {
    cancelTimer?.();
    cancelTimer = null;
    const head = queue[0];
    if (!head) return;
    const at = head.clock.now();
    refill(at);
    while (queue.length > 0 && tokens >= 1 - 1e-9) {
      tokens = Math.max(0, tokens - 1);
      const w = queue.shift()!;
      w.granted = true;
      w.wake?.();
    }
    const next = queue[0];
    if (next) cancelTimer = next.clock.schedule(at + (1 - tokens) * msPerToken, serve);
  };

  // One operation per limiter: operations are re-runnable, and a literal with a generator method
  // per call would cost a generator function each (~400 ns).
  const takeOp: Operation<void> & NotAPromise = notAPromise(
    {
      *[Symbol.iterator]() {
        const task = yield* currentTask(`${name}.take()`);
        task.checkpoint();
        const clock = task.top.contexts[CLOCK_KEY] as Clock;
        refill(clock.now());
        if (queue.length === 0 && tokens >= 1 - 1e-9) {
          tokens = Math.max(0, tokens - 1);
          return;
        }
        const waiter: Waiter = { granted: false, wake: null, clock };
        queue.push(waiter);
        const listening = task.runtime.listening;
        const since = clock.now();
        if (listening) task.emit({ type: "limiter:wait", name, waiting: queue.length });
        if (queue.length === 1) serve();
        try {
          yield park(
            waiter,
            () => waiter.granted,
            () => {
              const i = queue.indexOf(waiter);
              if (i >= 0) {
                queue.splice(i, 1);
                if (i === 0) serve();
              }
            },
            () => `${name}: ${queue.length} waiting`,
          );
        } catch (e) {
          // Granted in the same instant as the cancellation: the token goes back to the bucket.
          if (waiter.granted) {
            tokens = Math.min(burst, tokens + 1);
            serve();
          }
          throw e;
        }
        if (listening) {
          const waitedMs = clock.now() - since;
          task.emit({ type: "limiter:acquire", name, waitedMs, waiting: queue.length });
        }
      },
    },
    `${name}.take()`,
  );
  return {
    perSecond,
    burst,
    get waiting() {
      return queue.length;
    },
    take(): Operation<void> & NotAPromise {
      return takeOp;
    },
  };
}
