/**
 * Nested timeouts and the counting rule: a timeout that fires owns the cancellation it made, and
 * only the scope whose request is the last one left turns it into a TimeoutError.
 */
import assert from "node:assert/strict";
import { isCancelled, isTimeoutError, sleep, suspend, type Task, timeout, timeoutAt } from "@keel/core";
import { createHarness } from "@keel/testing";

const nameOf = (e: unknown) => (isCancelled(e) ? "Cancelled" : (e as Error).name);

// 1. An inner timeout fires and is caught while the outer is still armed: the inner converts its
//    own request, the count is back to 0, the task is not cancelling, and the outer keeps running.
{
  const h = createHarness();
  const task: Task<string> = h.run(() =>
    timeout(1000, function* body() {
      try {
        yield* timeout(100, sleep(5000));
      } catch (e) {
        h.mark(`inner: ${nameOf(e)}, count ${task.cancellationCount}, ${task.state}`);
      }
      yield* sleep(200);
      return "ok";
    }),
  );
  assert.equal(await task, "ok");
  assert.deepEqual(h.log, ["inner: TimeoutError, count 0, running@100"]);
  assert.equal(h.clock.now(), 300);
  await h.expectClean();
}

// 2. The outer timeout fires first: the inner made no request, so Cancelled passes through it
//    unchanged and only the outer throws.
{
  const h = createHarness();
  const task = h.run(() =>
    timeout(100, () =>
      timeout(1000, function* body() {
        try {
          yield* sleep(5000);
        } catch (e) {
          if (isCancelled(e)) h.mark(`body saw ${e.reason.kind} from ${e.reason.scope?.label}`);
          throw e;
        }
      }),
    ),
  );
  await assert.rejects(Promise.resolve(task), (e) => isTimeoutError(e) && e.timeoutMs === 100);
  assert.deepEqual(h.log, ["body saw timeout from timeout(100)@100"]);
  await h.expectClean();
}

// 3. Equal deadlines: both timers fire at 100 (the outer's first, it was registered first); both
//    requests are counted before the signal is delivered, so the inner is superseded and the
//    outer throws.
{
  const h = createHarness();
  const task = h.run(() =>
    timeoutAt(100, function* outer() {
      try {
        return yield* timeoutAt(100, suspend);
      } catch (e) {
        h.mark(`between the scopes: ${nameOf(e)}`);
        throw e;
      }
    }),
  );
  await assert.rejects(Promise.resolve(task), (e) => isTimeoutError(e) && e.label === "timeoutAt(100)");
  assert.deepEqual(h.log, ["between the scopes: Cancelled@100"]);
  assert.equal(h.eventsOf("timeout:fire").length, 2);
  assert.equal(h.eventsOf("timeout:superseded").length, 1);
  await h.expectClean();
}

// 4. An external cancel in the same instant as the timer: both requests are counted first; the
//    one from outside is never withdrawn, so no TimeoutError appears anywhere.
{
  const h = createHarness();
  const task = h.run(function* handler() {
    try {
      yield* timeout(100, suspend);
    } catch (e) {
      h.mark(`handler saw ${nameOf(e)}`);
      throw e;
    }
  });
  h.clock.schedule(100, () => void task.cancel("shutdown")); // a callback due at the same instant
  await Promise.resolve(task).catch(() => {});
  assert.equal(task.state, "cancelled");
  assert.deepEqual(h.log, ["handler saw Cancelled@100"]);
  await h.expectClean();
}

// 5. A TimeoutError thrown by the operation itself is not this scope's: it passes through untouched.
{
  const h = createHarness();
  const task = h.run(() => timeout(100, timeout(50, suspend())));
  await assert.rejects(Promise.resolve(task), (e) => isTimeoutError(e) && e.timeoutMs === 50);
  assert.equal(h.clock.now(), 50);
  await h.expectClean();
}

// 6. A body that swallows Cancelled and returns still times out, and the swallow is reported.
{
  const h = createHarness();
  const task = h.run(() =>
    timeout(100, function* stubborn() {
      try {
        yield* sleep(1000);
      } catch {
        return "swallowed"; // dropped
      }
      return "finished";
    }),
  );
  await assert.rejects(Promise.resolve(task), (e) => isTimeoutError(e) && e.elapsedMs === 100);
  assert.equal(h.eventsOf("cleanup:swallow").length, 1);
  await h.expectClean();
}

// 7. The deadline is inclusive, and a spent budget starts nothing.
{
  const h = createHarness();
  const exact = h.run(() =>
    timeout(100, function* exactlyAtTheDeadline() {
      yield* sleep(100);
      return "too late";
    }),
  );
  await assert.rejects(Promise.resolve(exact), isTimeoutError);
  let started = false;
  const zero = h.run(() =>
    timeout(0, function* never() {
      started = true;
    }),
  );
  await assert.rejects(Promise.resolve(zero), (e) => isTimeoutError(e) && e.elapsedMs === 0);
  assert.equal(started, false);
  assert.throws(() => timeout(-1, suspend), RangeError);
  await h.expectClean();
}
console.log("timeouts: ok");
