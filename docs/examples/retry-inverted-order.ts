/**
 * The inverted-order incident: an outer 5 s timeout around a retry loop whose per-attempt timeout
 * is 10 s, with 3 attempts. The outer timeout always fires inside the first attempt, so the retries
 * are dead code and a retry counter reads 0 forever. Keel cannot make the design work, but it says
 * so: a `retry:unreachable` warning, when the loop starts, naming both numbers.
 */
import assert from "node:assert/strict";
import {
  isRetryExhaustedError,
  isTimeoutError,
  type KeelEvent,
  retry,
  run,
  suspend,
  timeout,
} from "@keel/core";
import { createVirtualClock } from "@keel/testing";

function* slowBackend() {
  yield* suspend(); // a dependency that has stopped answering
}

// 1. The incident. Attempt 1's 10 s limit is clamped to the 5 s left; at 5000 both limits fall due
//    and the outer one wins, so the caller gets the outer TimeoutError: 1 attempt, 0 retries.
{
  const clock = createVirtualClock();
  const events: KeelEvent[] = [];
  let retries = 0;
  const task = run(
    () =>
      timeout(5000, () =>
        retry(slowBackend, {
          attempts: 3,
          perAttemptMs: 10_000,
          onRetry: () => {
            retries++;
          },
        }),
      ),
    { clock, onEvent: (e) => events.push(e) },
  );
  await assert.rejects(Promise.resolve(task), (e) => isTimeoutError(e) && e.timeoutMs === 5000);
  assert.equal(clock.now(), 5000);
  assert.equal(retries, 0);
  assert.equal(events.filter((e) => e.type === "retry:attempt").length, 1);
  assert.equal(clock.pendingTimers, 0); // no per-attempt timer lingers until 10 000

  const warnings = events.filter((e) => e.type === "retry:unreachable");
  assert.equal(warnings.length, 1);
  const w = warnings[0]!;
  assert.ok(w.type === "retry:unreachable");
  assert.equal(w.at, 0);
  assert.equal(w.perAttemptMs, 10_000);
  assert.equal(w.availableMs, 5000);
  console.log(`retry:unreachable at ${w.at}: ${w.message}`);
  console.log(`outcome: TimeoutError(5000) at ${clock.now()}, retries: ${retries}`);
}

// 2. The same mistake with the loop's own budget instead of an enclosing timeout: the budget runs out
//    during attempt 1, and the loop throws RetryExhaustedError (reason "budget") after 1 attempt.
{
  const clock = createVirtualClock();
  const events: KeelEvent[] = [];
  const task = run(() => retry(slowBackend, { attempts: 3, budgetMs: 5000, perAttemptMs: 10_000 }), {
    clock,
    onEvent: (e) => events.push(e),
  });
  await assert.rejects(Promise.resolve(task), (e) => {
    assert.ok(isRetryExhaustedError(e));
    assert.equal(e.reason, "budget");
    assert.equal(e.attempts, 1);
    console.log(`with budgetMs: ${e.message}`);
    return true;
  });
  assert.equal(events.filter((e) => e.type === "retry:unreachable").length, 1);
}

// 3. The fix: derive the per-attempt limit from the outer one so that every attempt fits. With
//    1500 ms attempts under 5000 ms, all three attempts run (0, 1600, 3300 with the random source
//    pinned to 0.5), the loop gives up on its own terms, and nothing warns.
{
  const clock = createVirtualClock();
  const events: KeelEvent[] = [];
  let retries = 0;
  const task = run(
    () =>
      timeout(5000, () =>
        retry(slowBackend, {
          attempts: 3,
          perAttemptMs: 1500,
          onRetry: () => {
            retries++;
          },
        }),
      ),
    { clock, random: () => 0.5, onEvent: (e) => events.push(e) },
  );
  await assert.rejects(Promise.resolve(task), (e) => isRetryExhaustedError(e) && e.reason === "attempts");
  const starts = events.filter((e) => e.type === "retry:attempt").map((e) => e.at);
  assert.deepEqual(starts, [0, 1600, 3300]);
  assert.equal(retries, 2);
  assert.equal(clock.now(), 4800);
  assert.equal(events.filter((e) => e.type === "retry:unreachable").length, 0);
  console.log(`fixed: attempts at ${starts.join(", ")}, ${retries} retries, gave up at ${clock.now()}`);
}
console.log("retry-inverted-order: ok");
