/**
 * Keel's errors: one stable `code` per failure, `isXxx` guards that work across duplicate copies
 * of the package, and messages that name the parameter and the value.
 */
import assert from "node:assert/strict";
import {
  errorCodes,
  isKeelError,
  isTaskCancelledError,
  isTimeoutError,
  type Operation,
  sleep,
  suspend,
  TimeoutError,
  timeout,
  useScope,
} from "@keel/core";
import { createHarness } from "@keel/testing";

const codeOf = (e: unknown) => (e as { code?: string }).code;

// KEEL_TIMEOUT: the scope's own outcome, with its budget, deadline and elapsed time.
{
  const h = createHarness();
  const e = await Promise.resolve(h.run(() => timeout(100, sleep(1000)))).catch((e: unknown) => e);
  assert.ok(e instanceof TimeoutError && isTimeoutError(e));
  assert.deepEqual(
    [e.code, e.timeoutMs, e.deadline, e.elapsedMs, e.label],
    ["KEEL_TIMEOUT", 100, 100, 100, "timeout(100)"],
  );
  assert.equal(e.message, "timeout(100): timed out after 100 ms");
  assert.equal(errorCodes.KEEL_TIMEOUT.retryable, true);
}

// KEEL_TASK_CANCELLED: what joining a cancelled task throws.
{
  const h = createHarness();
  const task = h.run(suspend);
  await h.run(() => sleep(1));
  await task.cancel("user left");
  const e = await Promise.resolve(task).catch((e: unknown) => e);
  assert.ok(isTaskCancelledError(e) && e.code === "KEEL_TASK_CANCELLED" && e.reason.message === "user left");
}

// KEEL_INVALID_ARGUMENT: a RangeError or TypeError thrown by the call itself, before anything starts.
assert.throws(
  () => timeout(-1, suspend),
  (e) => e instanceof RangeError && codeOf(e) === "KEEL_INVALID_ARGUMENT",
);
assert.throws(
  () => timeout(100, 42 as never),
  (e) =>
    e instanceof TypeError && codeOf(e) === "KEEL_INVALID_ARGUMENT" && /timeout\(ms, op\)/.test(e.message),
);

// KEEL_NO_TASK: an operation driven by hand, outside any Keel task.
{
  const it = sleep(10)[Symbol.iterator]();
  it.next(); // asks the runtime for the current task: nobody answers
  assert.throws(
    () => it.next(),
    (e) => isKeelError(e) && e.code === "KEEL_NO_TASK",
  );
}

// KEEL_SCOPE_CLOSED: spawning into a scope that has finished.
{
  const h = createHarness();
  const scope = await h.run(useScope);
  assert.equal(scope.closed, true);
  assert.throws(
    () => scope.spawn(suspend),
    (e) => isKeelError(e) && e.code === "KEEL_SCOPE_CLOSED",
  );
  await h.expectClean();
}

// KEEL_NOT_AN_INSTRUCTION: `yield` where `yield*` was meant, thrown into the generator at that point.
{
  const h = createHarness();
  const task = h.run(function* forgotTheStar(): Operation<void> {
    yield sleep(10) as never;
  });
  const e = await Promise.resolve(task).catch((e: unknown) => e);
  assert.ok(isKeelError(e) && e.code === "KEEL_NOT_AN_INSTRUCTION", String(e));
  await h.expectClean();
}

// The table behind the docs page: every code, what raises it, whether a retry can help.
// (`retryable` is true, false, or "by status" for HTTP statuses.)
for (const [code, { retryable }] of Object.entries(errorCodes))
  assert.ok(typeof retryable === "boolean" || retryable === "by status", code);
console.log("errors: ok");
