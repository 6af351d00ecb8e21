/**
 * Promise and callback interop: `until`, `call` with an AbortSignal, `action`, `useAbortSignal`,
 * and tasks awaited from promise code.
 */
import assert from "node:assert/strict";
import {
  action,
  call,
  isTaskCancelledError,
  isTimeoutError,
  run,
  scoped,
  sleep,
  spawn,
  suspend,
  timeout,
  until,
  useAbortSignal,
} from "@keel/core";
import { createHarness } from "@keel/testing";

// 1. until(promise): wait for a promise. It cannot be stopped, only abandoned: on cancellation
//    the task moves on, and a later rejection is handled (never an unhandled rejection).
{
  const h = createHarness();
  let rejectLater!: (e: unknown) => void;
  const pending = new Promise<string>((_resolve, reject) => {
    rejectLater = reject;
  });
  const task = h.run(() => timeout(100, until(pending)));
  await assert.rejects(Promise.resolve(task), isTimeoutError);
  rejectLater(new Error("arrives after nobody waits")); // ignored
  assert.equal(await h.run(() => until(Promise.resolve(42))), 42);
  await h.expectClean();
}

// 2. call(fn): fn gets an AbortSignal that aborts when the task leaves the call early (cancel,
//    timeout, cleanup cut). Pass it to fetch, streams, child processes.
{
  const h = createHarness();
  const seen: string[] = [];
  const fakeRequest = (signal: AbortSignal) =>
    new Promise<string>((_resolve, reject) => {
      signal.addEventListener("abort", () => {
        seen.push(`aborted: ${(signal.reason as Error).name}`);
        reject(signal.reason);
      });
    });
  const task = h.run(() => timeout(50, call(fakeRequest)));
  await assert.rejects(Promise.resolve(task), isTimeoutError);
  assert.deepEqual(seen, ["aborted: AbortError"]);
  await h.expectClean();
}

// 3. action(executor): wrap a callback API; the teardown runs exactly once, however the wait ends.
{
  const h = createHarness();
  let teardowns = 0;
  const ticks: Array<() => void> = [];
  const onTick = (cb: () => void) => {
    ticks.push(cb);
    return () => {
      teardowns++;
      ticks.splice(ticks.indexOf(cb), 1);
    };
  };
  const task = h.run(function* waitForTick() {
    return yield* action<string>((resolve) => onTick(() => resolve("tick")), "waiting for a tick");
  });
  await h.run(() => sleep(1)); // let the task reach its action
  ticks[0]?.();
  assert.equal(await task, "tick");
  assert.equal(teardowns, 1);
  assert.equal(ticks.length, 0);
  await h.expectClean();
}

// 4. useAbortSignal(): a signal tied to the current scope; it aborts when the scope ends, however
//    it ends, so work started with it cannot outlive its owner.
{
  const h = createHarness();
  const signal = await h.run(() =>
    scoped(function* job() {
      const signal = yield* useAbortSignal();
      assert.equal(signal.aborted, false);
      yield* sleep(10);
      return signal;
    }),
  );
  assert.equal(signal.aborted, true);
  await h.expectClean();
}

// 5. Tasks from promise code: await a task for its value; a cancelled one rejects with
//    TaskCancelledError; `await task.cancel()` resolves once it has unwound.
{
  const h = createHarness();
  const task = h.run(function* server() {
    yield* spawn(function* poller() {
      for (;;) yield* sleep(1000);
    });
    yield* suspend();
  });
  await h.run(() => sleep(10));
  await task.cancel("shutting down");
  await assert.rejects(
    Promise.resolve(task),
    (e) => isTaskCancelledError(e) && /shutting down/.test(e.message),
  );
  await h.expectClean();
}

// 6. Without a clock option, run() uses the real clock.
assert.equal(await run(() => until(Promise.resolve("real"))), "real");
console.log("interop: ok");
