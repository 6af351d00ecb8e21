/**
 * The host's timers and clocks, as they were when `@keel/core` loaded.
 *
 * Why kept here rather than looked up at each call: a test that installs fake timers later
 * (`vi.useFakeTimers()`, sinon's `useFakeTimers`) replaces the globals, `performance` and `Date`
 * included, and patches `node:timers` too. Keel's internals (the real clock's host timer, the run
 * queue's error path, the HTTP client's releases of its virtual-clock holds) must keep running on
 * the real event loop, or they would wait for fake time that nobody advances, and a real-clock
 * `run` would read a clock that stands still. So every module of `@keel/core` schedules and reads
 * time through these, never through the globals (core never reads `Date.now`: the real clock counts
 * from `performance.timeOrigin`) (`packages/core/test/host-timers.test.ts` checks).
 * @module
 */

/**
 * `fn` bound to the global object: called as a method of {@link hostTimers}, a browser's `setTimeout`
 * would throw "Illegal invocation". A host without it (a browser has no `setImmediate`) keeps none.
 */
function bound<F extends (...args: never[]) => unknown>(fn: F): F {
  return (typeof fn === "function" ? fn.bind(globalThis) : fn) as F;
}

/**
 * The host's timer functions. An object rather than separate exports so a test can spy on what the
 * real clock arms (`vi.spyOn(hostTimers, "setTimeout")`); nothing outside tests writes it.
 */
export const hostTimers: {
  setTimeout: typeof setTimeout;
  clearTimeout: typeof clearTimeout;
  setInterval: typeof setInterval;
  clearInterval: typeof clearInterval;
  setImmediate: typeof setImmediate;
  clearImmediate: typeof clearImmediate;
  queueMicrotask: typeof queueMicrotask;
} = {
  setTimeout: bound(globalThis.setTimeout),
  clearTimeout: bound(globalThis.clearTimeout),
  setInterval: bound(globalThis.setInterval),
  clearInterval: bound(globalThis.clearInterval),
  setImmediate: bound(globalThis.setImmediate),
  clearImmediate: bound(globalThis.clearImmediate),
  queueMicrotask: bound(globalThis.queueMicrotask),
};

/**
 * The host's `performance` object (a faked one is a different object). Call `hostPerformance.now()`,
 * a method call as before, rather than a bound copy: the real clock reads it for every deadline.
 */
export const hostPerformance: typeof globalThis.performance = globalThis.performance;
