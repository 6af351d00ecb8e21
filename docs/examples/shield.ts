/**
 * `shield`: a step that must finish is not interrupted by cancellation from outside, for a
 * bounded time (`limitMs`, default the cleanup budget), and is always owned by its caller.
 */
import assert from "node:assert/strict";
import { call, isCancelled, isTimeoutError, remaining, shield, sleep, suspend, timeout } from "@keel/core";
import { createHarness } from "@keel/testing";

// 1. The caller is cancelled at 100 while the shielded commit runs: the commit finishes at 300, and
//    the cancellation is delivered right there, as `yield* shield(…)` throws Cancelled.
{
  const h = createHarness();
  const task = h.run(function* saver() {
    try {
      yield* shield(function* commit() {
        yield* sleep(300);
        h.mark("committed");
      });
      h.mark("after the shield"); // never: the delayed cancellation arrives first
    } catch (e) {
      if (isCancelled(e)) h.mark(`then ${e.reason.kind}`);
      throw e;
    }
  });
  await h.run(function* operator() {
    yield* sleep(100);
    yield* task.cancel();
  });
  assert.deepEqual(h.log, ["committed@300", "then cancel@300"]);
  assert.equal(h.eventsOf("shield:delay")[0]?.delayedMs, 200);
  await h.expectClean();
}

// 2. The canonical bounded cleanup: a goodbye message in `finally`, allowed 200 ms whatever the
//    enclosing deadline says. It never answers, so at 1200 the shield cancels it (its
//    AbortSignal fires) and the caller's timeout completes: TimeoutError at 1200, never later.
{
  const h = createHarness();
  let aborted = false;
  const sendGoodbye = (signal: AbortSignal) =>
    new Promise<void>(() => {
      signal.addEventListener("abort", () => {
        aborted = true;
      });
    });
  const task = h.run(() =>
    timeout(1000, function* session() {
      try {
        yield* suspend();
      } finally {
        yield* shield(
          function* goodbye() {
            h.mark(`goodbye has ${yield* remaining()} ms`);
            yield* call(sendGoodbye);
          },
          { limitMs: 200 },
        );
      }
    }),
  );
  await assert.rejects(Promise.resolve(task), (e) => isTimeoutError(e) && e.elapsedMs === 1200);
  assert.equal(aborted, true);
  assert.deepEqual(h.log, ["goodbye has 200 ms@1000"]);
  await h.expectClean();
}

// 3. A shield protects from interruption, not from duration: the timeout fires at 100, the
//    shielded work runs to 300, then the timeout throws (and the value is dropped).
{
  const h = createHarness();
  const task = h.run(() =>
    timeout(100, () =>
      shield(function* slow() {
        yield* sleep(300);
        return "v";
      }),
    ),
  );
  await assert.rejects(
    Promise.resolve(task),
    (e) => isTimeoutError(e) && e.timeoutMs === 100 && e.elapsedMs === 300,
  );
  await h.expectClean();
}

// 4. Nobody cancels the caller, but the work outlives limitMs: the shield throws TimeoutError.
{
  const h = createHarness();
  const task = h.run(() => shield(() => sleep(5000), { limitMs: 2000 }));
  await assert.rejects(Promise.resolve(task), (e) => isTimeoutError(e) && e.timeoutMs === 2000);
  assert.throws(() => shield(suspend, { limitMs: Infinity }), RangeError); // never unbounded
  await h.expectClean();
}
// 5. Why a shield in `finally` at all: a finally that runs on the success path can be hit by a
//    cancellation while it works. Here the body returns at 90 and its audit needs 30 ms; the
//    timeout fires at 100. Unshielded, the audit is cancelled; shielded, it completes at 120.
for (const shielded of [false, true]) {
  const h = createHarness();
  const audit = function* audit() {
    yield* sleep(30);
    h.mark("audit written");
  };
  const task = h.run(() =>
    timeout(100, function* handler() {
      try {
        yield* sleep(90);
        return "v";
      } finally {
        yield* shielded ? shield(audit) : audit();
      }
    }),
  );
  await assert.rejects(Promise.resolve(task), isTimeoutError);
  assert.deepEqual(h.log, shielded ? ["audit written@120"] : []);
  await h.expectClean();
}

// 6. The shielded work fails while the caller is being cancelled: the caller gets Cancelled, and
//    the work's error is reported, not lost.
{
  const h = createHarness();
  const commitErr = new Error("commit failed");
  const task = h.run(function* saver() {
    yield* shield(function* commit() {
      yield* sleep(300);
      throw commitErr;
    });
  });
  await h.run(function* operator() {
    yield* sleep(100);
    yield* task.cancel();
  });
  assert.equal(task.state, "cancelled");
  assert.equal(h.eventsOf("error:suppressed")[0]?.error, commitErr);
  await h.expectClean();
}

// 7. The goodbye of case 2, answering after 100 ms: the timeout throws at 1100.
{
  const h = createHarness();
  const task = h.run(() =>
    timeout(1000, function* session() {
      try {
        yield* suspend();
      } finally {
        yield* shield(() => sleep(100), { limitMs: 200 });
      }
    }),
  );
  await assert.rejects(Promise.resolve(task), (e) => isTimeoutError(e) && e.elapsedMs === 1100);
  await h.expectClean();
}
// 8. Shield limits nest: an inner shield gets what is left of the enclosing one. Nested in a
//    `finally` with a 300 ms budget, cancelled at 10: settled at 1210 (the outer 900 plus one
//    budget), although the inner shield asked for 1800 ms and its work swallows every cancellation.
{
  const h = createHarness();
  const task = h.run(
    function* owner() {
      try {
        yield* suspend();
      } finally {
        yield* shield(
          () =>
            shield(
              function* swallowsEverything() {
                for (;;) {
                  try {
                    yield* suspend();
                  } catch {}
                }
              },
              { limitMs: 1800 },
            ),
          { limitMs: 900 },
        );
      }
    },
    { cleanupBudgetMs: 300 },
  );
  await h.run(function* operator() {
    yield* sleep(10);
    yield* task.cancel();
    h.mark("settled");
  });
  assert.deepEqual(h.log, ["settled@1210"]);
  await h.expectClean();
}
console.log("shield: ok");
