/**
 * The clock interface the kernel schedules through.
 *
 * The kernel knows nothing of wall time: it only asks "what time is it on this clock" and "call me at
 * this instant", so tests can hand it a virtual clock. The real implementation lives in `time/`.
 * @module
 */

/**
 * A source of time and timers. `now()` and every `at` are milliseconds on this clock.
 *
 * @example
 * ```ts
 * import { type Clock, run, sleep } from "@keel/core";
 * import { createVirtualClock } from "@keel/testing";
 * const inner = createVirtualClock();
 * const asked: number[] = [];
 * // A clock that records every instant the runtime schedules, on top of another clock.
 * const recording: Clock = {
 *   now: () => inner.now(),
 *   schedule(at, fn) {
 *     asked.push(at);
 *     return inner.schedule(at, fn);
 *   },
 * };
 * await run(function* () { yield* sleep(10); yield* sleep(20); }, { clock: recording });
 * console.log(asked); // [10, 30]
 * ```
 */
export interface Clock {
  /** The current time in milliseconds. */
  now(): number;
  /**
   * Calls `fn` at `at` (or soon after, never before) and returns a function that cancels it.
   * Callbacks due at the same instant run in registration order.
   */
  schedule(at: number, fn: () => void): () => void;
  /**
   * Optional: tells a virtual clock that something outside the runtime (a socket, a child process)
   * is in flight, so it must not jump time; returns the release. Real clocks ignore it. `key` names
   * what the hold waits on (an origin), so a test server can declare that key idle.
   */
  hold?(description: string, key?: string): () => void;
}

/**
 * @internal A clock's cheap reading for observability stamps (when a task started, when a wait
 * began): a value at most about a millisecond old, or older by the length of a synchronous step
 * that is still running. Only the real clock provides one (see `createRealClock`); see `stampNow`.
 */
export const COARSE_NOW: unique symbol = Symbol("keel.coarse-now");

/** @internal A clock that may carry a {@link COARSE_NOW} reading. */
export interface StampableClock extends Clock {
  readonly [COARSE_NOW]?: () => number;
}

/**
 * @internal The time for an observability stamp: the clock's coarse reading where it has one (the
 * real clock, where every host clock read is a call out of JavaScript, ~90 ns on a VM), else
 * `now()`, so a virtual clock (and any clock of one's own) gives exact figures.
 */
export function stampNow(clock: Clock): number {
  const coarse = (clock as StampableClock)[COARSE_NOW];
  return coarse === undefined ? clock.now() : coarse();
}
