/**
 * Budgets nest strictly: each attempt's `perAttemptMs` sits inside the loop's `budgetMs`, which sits
 * inside the caller's deadline, and every inner limit is clamped to what is left of the outer ones.
 * The loop never starts a backoff sleep that would cross a deadline, and `retryAfterMs` (a server's
 * `Retry-After`) replaces the backoff delay.
 */
import assert from "node:assert/strict";
import {
  constant,
  deadline,
  exponential,
  isRetryExhaustedError,
  isTimeoutError,
  type KeelEvent,
  remaining,
  retry,
  run,
  suspend,
  timeout,
} from "@keel/core";
import { createVirtualClock } from "@keel/testing";

const httpError = (status: number, extra: object = {}) =>
  Object.assign(new Error(`HTTP ${status}`), { status, ...extra });

// 1. Caller: 5000 ms. The request's retry loop: 3000 ms in all. Each attempt: 1000 ms. The random
//    source is pinned to 0.5, so the default backoff (full jitter over 200, 400, …) sleeps 100, 200.
//    Attempt 3 starts at 2300 and gets only the 700 ms left of the budget; when the budget runs out at
//    3000, the loop throws RetryExhaustedError (reason "budget"), and the caller has 2000 ms left.
{
  const clock = createVirtualClock();
  const seen: string[] = [];
  const task = run(
    () =>
      timeout(5000, function* handler() {
        try {
          yield* retry(
            function* callBackend() {
              seen.push(
                `attempt at ${clock.now()}: deadline ${yield* deadline()}, ${yield* remaining()} ms left`,
              );
              yield* suspend(); // a backend that never answers
            },
            { attempts: 5, budgetMs: 3000, perAttemptMs: 1000 },
          );
        } catch (e) {
          assert.ok(isRetryExhaustedError(e));
          seen.push(`gave up at ${clock.now()}: ${e.reason} after ${e.attempts} attempts`);
          seen.push(`the caller still has ${yield* remaining()} ms`);
        }
      }),
    { clock, random: () => 0.5 },
  );
  await task;
  for (const line of seen) console.log(line);
  assert.deepEqual(seen, [
    "attempt at 0: deadline 1000, 1000 ms left",
    "attempt at 1100: deadline 2100, 1000 ms left",
    "attempt at 2300: deadline 3000, 700 ms left",
    "gave up at 3000: budget after 3 attempts",
    "the caller still has 2000 ms",
  ]);
  assert.equal(clock.pendingTimers, 0);
}

// 2. A sleep that would cross the deadline is not started. Under the caller's 1000 ms, attempts of
//    300 ms with 200 ms between them: attempt 2 ends at 800, and a 200 ms sleep would end exactly at
//    the (inclusive) deadline, so the loop gives up at 800 with the history, instead of sleeping
//    into a timeout that would tell the caller nothing.
{
  const clock = createVirtualClock();
  const events: KeelEvent[] = [];
  const task = run(
    () =>
      timeout(1000, () =>
        retry(
          function* callBackend() {
            yield* suspend();
          },
          {
            attempts: 10,
            perAttemptMs: 300,
            backoff: constant(200),
          },
        ),
      ),
    { clock, onEvent: (e) => events.push(e) },
  );
  await assert.rejects(Promise.resolve(task), (e) => {
    assert.ok(isRetryExhaustedError(e));
    console.log(`${e.name} at ${clock.now()}: reason ${e.reason}, ${e.attempts} attempts`);
    console.log(`  ${e.message}`);
    assert.equal(e.reason, "deadline");
    assert.equal(e.attempts, 2);
    assert.ok(isTimeoutError(e.cause)); // attempt 2's own per-attempt timeout
    return true;
  });
  assert.equal(clock.now(), 800);
  const giveUp = events.find((e) => e.type === "retry:giveup");
  assert.ok(giveUp?.type === "retry:giveup" && giveUp.reason === "deadline" && giveUp.delayMs === 200);
  assert.equal(
    events.filter((e) => e.type === "timeout:fire" && e.scope.label === "timeout(1000)").length,
    0,
  );
}

// 3. Retry-After. An error with `retryAfterMs` (the HTTP client sets it from the header) replaces the
//    computed delay, even above the backoff's `maxMs`: the second call is at exactly 2000.
{
  const clock = createVirtualClock();
  const starts: number[] = [];
  const value = await run(
    () =>
      retry(
        function* callBackend() {
          starts.push(clock.now());
          if (starts.length === 1) throw httpError(429, { retryAfterMs: 2000 });
          return "ok";
        },
        { backoff: exponential({ baseMs: 100, maxMs: 1000 }) },
      ),
    { clock },
  );
  assert.equal(value, "ok");
  assert.deepEqual(starts, [0, 2000]);
  console.log(`Retry-After 2 s: calls at ${starts.join(" and ")}`);
}

// 4. A Retry-After longer than the time left: the loop gives up at once, without sleeping, and the
//    cause carries the server's answer. The reason says which limit: "deadline" for the caller's,
//    "budget" for the loop's own `budgetMs`.
{
  const clock = createVirtualClock();
  const busy = () => httpError(503, { retryAfterMs: 10_000 });
  const underDeadline = run(
    () =>
      timeout(3000, () =>
        retry(function* callBackend() {
          throw busy();
        }),
      ),
    { clock },
  );
  await assert.rejects(
    Promise.resolve(underDeadline),
    (e) => isRetryExhaustedError(e) && e.reason === "deadline" && e.elapsedMs === 0,
  );
  const underBudget = run(
    () =>
      retry(
        function* callBackend() {
          throw busy();
        },
        { budgetMs: 3000 },
      ),
    { clock },
  );
  await assert.rejects(Promise.resolve(underBudget), (e) => {
    assert.ok(isRetryExhaustedError(e));
    assert.equal(e.reason, "budget");
    assert.equal((e.cause as { retryAfterMs: number }).retryAfterMs, 10_000);
    return true;
  });
  assert.equal(clock.now(), 0);
  assert.equal(clock.pendingTimers, 0);
  console.log("Retry-After 10 s with 3 s left: gave up at once (deadline / budget)");
}
console.log("retry-budgets: ok");
