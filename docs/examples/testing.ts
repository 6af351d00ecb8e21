/**
 * Testing with `@keel/testing`: a virtual clock that jumps when every task waits, a timestamped
 * log, the event stream, and the leak check every test ends with.
 */
import assert from "node:assert/strict";
import { now, run, sleep, spawn, suspend, timeout, until } from "@keel/core";
import { createHarness, createVirtualClock } from "@keel/testing";

// 1. Autojump: a minute of virtual time passes in about a millisecond of real time.
{
  const clock = createVirtualClock();
  const started = performance.now();
  const t = await run(
    function* minute() {
      yield* sleep(60_000);
      return yield* now();
    },
    { clock },
  );
  assert.equal(t, 60_000);
  assert.ok(performance.now() - started < 500);
}

// 2. The harness: h.run runs on its clock and records events; h.mark logs "text@time".
{
  const h = createHarness();
  await h.run(function* retryOnce() {
    h.mark("first try");
    yield* sleep(250);
    h.mark("second try");
  });
  assert.deepEqual(h.log, ["first try@0", "second try@250"]);
  assert.deepEqual(
    h.eventsOf("task:settle").map((e) => e.state),
    ["completed"],
  );
  await h.expectClean();
}

// 3. clock.advance(ms) inside a task is ms of blocking work: timers due meanwhile fire, and the
//    cancellation they cause is delivered at the next suspension point.
{
  const h = createHarness();
  const task = h.run(() =>
    timeout(10, function* busy() {
      h.clock.advance(20); // 20 ms of CPU-bound work
      h.mark("the synchronous stretch ends");
      yield* sleep(1); // Cancelled is thrown here
    }),
  );
  await assert.rejects(Promise.resolve(task), { name: "TimeoutError", elapsedMs: 20 });
  assert.deepEqual(h.log, ["the synchronous stretch ends@20"]);
  await h.expectClean();
}

// 4. Without autojump, time moves only when the test says so.
{
  const h = createHarness({ autojump: false });
  const task = h.run(function* waiter() {
    yield* sleep(100);
    h.mark("woke");
  });
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(h.log, []);
  h.clock.advance(100);
  await task;
  assert.deepEqual(h.log, ["woke@100"]);
  await h.expectClean();
}

// 5. Real I/O under autojump: hold the clock while something outside the runtime is in flight,
//    or the clock jumps past your timeout while the real work is still running.
{
  const h = createHarness();
  const slowIo = () =>
    new Promise<string>((resolve) => {
      const release = h.clock.hold("fake socket");
      setTimeout(() => {
        release();
        resolve("answer");
      }, 5);
    });
  assert.equal(await h.run(() => timeout(1000, () => until(slowIo()))), "answer");
  await h.expectClean();
}

// 6. The leak check: a task still running, or a timer still pending, fails the test.
{
  const h = createHarness();
  const forgotten = h.run(function* server() {
    yield* spawn(function* poller() {
      for (;;) yield* sleep(1000);
    });
    yield* suspend();
  });
  await assert.rejects(h.expectClean(), /leak check failed: 2 live task/);
  await forgotten.cancel();
  await h.expectClean();
}
console.log("testing: ok");
