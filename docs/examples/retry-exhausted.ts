/**
 * When a retry loop runs out, it throws `RetryExhaustedError`: `reason` says which limit ("attempts",
 * "budget" or "deadline"), `attempts` how many ran, `cause` the last attempt's error, and `history`
 * what happened at each attempt. Every attempt, sleep and give-up is also an event.
 */
import assert from "node:assert/strict";
import {
  exponential,
  isRetryExhaustedError,
  isTransient,
  type KeelEvent,
  type RetryInfo,
  retry,
  run,
  sleep,
} from "@keel/core";
import { createVirtualClock } from "@keel/testing";

const unavailable = () => Object.assign(new Error("unavailable"), { status: 503 });

// 1. Three attempts of 10 ms each, all 503, with 50 and 100 ms between them (random pinned to 0.5).
{
  const clock = createVirtualClock();
  const events: KeelEvent[] = [];
  const retries: RetryInfo[] = [];
  let last: unknown;
  const task = run(
    () =>
      retry(
        function* getInventory() {
          yield* sleep(10);
          last = unavailable();
          throw last;
        },
        {
          attempts: 3,
          backoff: exponential({ baseMs: 100, maxMs: 1000 }),
          onRetry: (info) => retries.push(info),
        },
      ),
    { clock, random: () => 0.5, onEvent: (e) => events.push(e) },
  );
  await assert.rejects(Promise.resolve(task), (e) => {
    assert.ok(isRetryExhaustedError(e));
    console.log(e.message);
    assert.equal(e.code, "KEEL_RETRY_EXHAUSTED");
    assert.equal(e.reason, "attempts");
    assert.equal(e.attempts, 3);
    assert.equal(e.elapsedMs, 180);
    assert.equal(e.cause, last); // the last attempt's error, unchanged
    assert.equal(e.retryable, false); // an outer retry leaves it alone
    const rows = e.history.map(
      (h) =>
        `  attempt ${h.attempt}: ${h.startedAt}–${h.endedAt} ${(h.error as Error).message}` +
        (h.delayMs === undefined ? "" : `, then ${h.delayMs} ms (${h.delayReason})`),
    );
    console.log(rows.join("\n"));
    assert.deepEqual(rows, [
      "  attempt 1: 0–10 unavailable, then 50 ms (backoff)",
      "  attempt 2: 60–70 unavailable, then 100 ms (backoff)",
      "  attempt 3: 170–180 unavailable",
    ]);
    return true;
  });

  // onRetry ran before each sleep, with what the loop knew at that moment.
  assert.deepEqual(
    retries.map(({ attempt, elapsedMs, delayMs, delayReason, timedOut }) => ({
      attempt,
      elapsedMs,
      delayMs,
      delayReason,
      timedOut,
    })),
    [
      { attempt: 1, elapsedMs: 10, delayMs: 50, delayReason: "backoff", timedOut: false },
      { attempt: 2, elapsedMs: 70, delayMs: 100, delayReason: "backoff", timedOut: false },
    ],
  );

  // The events, with their times.
  const trail = events.filter((e) => e.type.startsWith("retry:")).map((e) => `${e.type}@${e.at}`);
  console.log(`events: ${trail.join(", ")}`);
  assert.deepEqual(trail, [
    "retry:start@0",
    "retry:attempt@0",
    "retry:sleep@10",
    "retry:attempt@60",
    "retry:sleep@70",
    "retry:attempt@170",
    "retry:giveup@180",
    "retry:end@180",
  ]);
}

// 2. A non-retryable failure after a retryable one: the 404 itself is thrown, not wrapped, and the
//    give-up event says why ("not-retryable"); the first attempt is still in the events.
{
  const clock = createVirtualClock();
  const events: KeelEvent[] = [];
  const notFound = Object.assign(new Error("no such item"), { status: 404 });
  let calls = 0;
  const task = run(
    () =>
      retry(function* getInventory() {
        calls++;
        throw calls === 1 ? unavailable() : notFound;
      }),
    { clock, random: () => 0.5, onEvent: (e) => events.push(e) },
  );
  await assert.rejects(Promise.resolve(task), (e) => e === notFound);
  const giveUp = events.find((e) => e.type === "retry:giveup");
  assert.ok(giveUp?.type === "retry:giveup" && giveUp.reason === "not-retryable" && giveUp.attempt === 2);
  console.log(`404 on attempt 2: thrown as is, retry:giveup reason ${giveUp.reason}`);
}

// 3. A custom `retryOn` replaces isTransient entirely, so extend it rather than start from scratch:
//    here a 409 conflict is also worth another try, and everything isTransient refuses stays refused.
{
  const clock = createVirtualClock();
  let calls = 0;
  const value = await run(
    () =>
      retry(
        function* saveDraft() {
          calls++;
          if (calls === 1) throw Object.assign(new Error("conflict"), { status: 409 });
          return "saved";
        },
        { retryOn: (e) => isTransient(e) || (e as { status?: number }).status === 409 },
      ),
    { clock, random: () => 0.5 },
  );
  assert.equal(value, "saved");
  assert.equal(calls, 2);
  console.log(`retryOn extended with 409: ${value} after ${calls} calls`);
}
console.log("retry-exhausted: ok");
