/**
 * Reading time and the deadline in force: `now`, `deadline`, `remaining`.
 * @module
 */

import type { Clock } from "../kernel/clock.js";
import { currentTask } from "../kernel/current.js";
import { type NotAPromise, notAPromise } from "../kernel/not-a-promise.js";
import type { Operation } from "../kernel/operation.js";
import { CLOCK_KEY } from "../kernel/task.js";

/**
 * The current time on the runtime's clock, in milliseconds.
 *
 * @example
 * ```ts
 * import { now, run } from "@keel/core";
 * console.log(typeof (await run(now))); // "number"
 * ```
 */
export function now(): Operation<number> & NotAPromise {
  return NOW_OP;
}

// One operation for every caller (operations are re-runnable): no generator function per call.
const NOW_OP: Operation<number> & NotAPromise = notAPromise(
  {
    *[Symbol.iterator]() {
      const task = yield* currentTask("now()");
      return (task.top.contexts[CLOCK_KEY] as Clock).now();
    },
  },
  "now()",
);

/**
 * The effective deadline where the caller runs: the earliest over every enclosing `timeout` and
 * `timeoutAt`, inherited by spawned children; `Infinity` when none. Inside a `shield` only the
 * shield's limit applies; during cleanup, the cleanup deadline (lowered by scopes opened there).
 *
 * @example
 * ```ts
 * import { deadline, run, timeoutAt } from "@keel/core";
 * console.log(await run(() => timeoutAt(Date.now() + 60_000, deadline)) > Date.now()); // true
 * ```
 */
export function deadline(): Operation<number> & NotAPromise {
  return DEADLINE_OP;
}

// One operation for every caller (operations are re-runnable): no generator function per call.
const DEADLINE_OP: Operation<number> & NotAPromise = notAPromise(
  {
    *[Symbol.iterator]() {
      const task = yield* currentTask("deadline()");
      return task.effectiveDeadline();
    },
  },
  "deadline()",
);

/**
 * What is left of the effective deadline, in whole milliseconds rounded down (never negative;
 * `Infinity` when none). Pass it downstream (a header, a query budget) so each hop sees only what
 * remains. Rounded down because the real clock reads fractions of a millisecond: a budget passed on
 * is then an integer, and never more than what is really left.
 *
 * @example
 * ```ts
 * import { remaining, run, timeout } from "@keel/core";
 * console.log(await run(() => timeout(2000, remaining)) <= 2000); // true
 * ```
 */
export function remaining(): Operation<number> & NotAPromise {
  return REMAINING_OP;
}

// One operation for every caller (operations are re-runnable): no generator function per call.
const REMAINING_OP: Operation<number> & NotAPromise = notAPromise(
  {
    *[Symbol.iterator]() {
      const task = yield* currentTask("remaining()");
      const clock = task.top.contexts[CLOCK_KEY] as Clock;
      return Math.max(0, Math.floor(task.effectiveDeadline() - clock.now()));
    },
  },
  "remaining()",
);

/**
 * The runtime's clock where the caller runs (virtual in tests), for integrations that schedule
 * their own timers or hold a virtual clock while real I/O is in flight.
 *
 * @example
 * ```ts
 * import { run, useClock } from "@keel/core";
 * const clock = await run(useClock);
 * console.log(typeof clock.now()); // "number"
 * ```
 */
export function useClock(): Operation<Clock> & NotAPromise {
  return USECLOCK_OP;
}

// One operation for every caller (operations are re-runnable): no generator function per call.
const USECLOCK_OP: Operation<Clock> & NotAPromise = notAPromise(
  {
    *[Symbol.iterator]() {
      const task = yield* currentTask("useClock()");
      return task.top.contexts[CLOCK_KEY] as Clock;
    },
  },
  "useClock()",
);
