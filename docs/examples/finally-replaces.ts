/**
 * A `finally` that throws replaces the exception in flight: a JavaScript rule that no runtime can
 * work around. When Keel's `Cancelled` is thrown into a `finally` that was handling an error, that
 * error is gone; and when a `finally` throws an error while `Cancelled` unwinds, the error wins.
 */
import assert from "node:assert/strict";
import { isCancelled, isTimeoutError, sleep, suspend, timeout } from "@keel/core";
import { createHarness } from "@keel/testing";

// 1. The language rule, no Keel involved.
{
  const first = new Error("first");
  const second = new Error("second");
  assert.throws(
    () => {
      try {
        throw first;
      } finally {
        // biome-ignore lint/correctness/noUnsafeFinally: this is the point of the example
        throw second;
      }
    },
    (e) => e === second, // `first` is unreachable now
  );
}

// 2. So: an error is thrown, the finally starts async cleanup, the deadline passes during it. The
//    cleanup step receives Cancelled, which replaces the error; the caller sees TimeoutError.
{
  const h = createHarness();
  const valueErr = new Error("invalid order");
  const task = h.run(() =>
    timeout(10, function* handler() {
      try {
        throw valueErr;
      } finally {
        yield* sleep(1000); // cut by the deadline at 10: Cancelled replaces valueErr here
      }
    }),
  );
  await assert.rejects(Promise.resolve(task), (e) => isTimeoutError(e) && !("suppressed" in e));
  await h.expectClean();
}

// 3. The remedy: hand the error to someone (log it, record it) before the cleanup that can be cut.
{
  const h = createHarness();
  const valueErr = new Error("invalid order");
  const seen: unknown[] = [];
  const task = h.run(() =>
    timeout(10, function* handler() {
      try {
        throw valueErr;
      } catch (e) {
        seen.push(e); // reported while it still exists
        throw e;
      } finally {
        yield* sleep(1000);
      }
    }),
  );
  await assert.rejects(Promise.resolve(task), isTimeoutError);
  assert.deepEqual(seen, [valueErr]);
  await h.expectClean();
}

// 4. The other direction: an error beats a cancellation. A finally that throws while Cancelled is
//    unwinding replaces the signal; Keel keeps the error as is, attaches the TimeoutError it
//    would have thrown to its `suppressed`, and reports the replaced cancellation.
{
  const h = createHarness();
  const closeErr = new Error("close failed");
  const task = h.run(() =>
    timeout(10, function* handler() {
      try {
        yield* suspend();
      } finally {
        // biome-ignore lint/correctness/noUnsafeFinally: a cleanup that fails
        throw closeErr;
      }
    }),
  );
  await assert.rejects(Promise.resolve(task), (e) => e === closeErr);
  const suppressed = (closeErr as Error & { suppressed?: unknown[] }).suppressed ?? [];
  assert.equal(suppressed.length, 1);
  assert.ok(isTimeoutError(suppressed[0]));
  assert.ok(!suppressed.some(isCancelled)); // a Cancelled is never an error to attach
  assert.equal(h.eventsOf("cancel:replaced").length, 1);
  assert.equal(task.state, "failed");
  await h.expectClean();
}
console.log("finally-replaces: ok");
