/**
 * What `retry` retries: `isTransient` says yes for failures a new attempt can cure, and no for
 * everything else. A non-retryable error propagates unchanged at its first occurrence, an inner
 * retry's `RetryExhaustedError` is not retried again, and a cancellation ends the loop at once.
 */
import assert from "node:assert/strict";
import {
  constant,
  isRetryExhaustedError,
  isTaskCancelledError,
  isTransient,
  type KeelEvent,
  RetryExhaustedError,
  retry,
  run,
  suspend,
  timeout,
} from "@keel/core";
import { createVirtualClock } from "@keel/testing";

const httpError = (status: number, extra: object = {}) =>
  Object.assign(new Error(`HTTP ${status}`), { status, ...extra });
const netError = (code: string) => Object.assign(new Error(`connect ${code}`), { code });

// 1. The table. Statuses that mean "the service did not process this request", network failures
//    (also when wrapped, as `fetch` does), and a timeout are transient; the rest is not.
{
  const clock = createVirtualClock();
  let timeoutError: unknown;
  try {
    await run(() => timeout(10, suspend), { clock });
  } catch (e) {
    timeoutError = e;
  }
  const statuses = (...list: number[]) => list.map((s) => httpError(s));
  const rows: [string, unknown[], boolean][] = [
    ["status 408, 425, 429, 500, 502, 503, 504", statuses(408, 425, 429, 500, 502, 503, 504), true],
    ["status 400, 401, 403, 404, 409, 422, 501", statuses(400, 401, 403, 404, 409, 422, 501), false],
    [
      "ECONNRESET, ECONNREFUSED, EPIPE, ETIMEDOUT",
      ["ECONNRESET", "ECONNREFUSED", "EPIPE", "ETIMEDOUT"].map(netError),
      true,
    ],
    ["ENOTFOUND (a wrong host name)", [netError("ENOTFOUND")], false],
    ["'socket hang up'", [new Error("socket hang up")], true],
    [
      "TypeError('fetch failed') with a network cause",
      [new TypeError("fetch failed", { cause: netError("ECONNREFUSED") })],
      true,
    ],
    ["Keel's TimeoutError", [timeoutError], true],
    [
      "TypeError, RangeError, SyntaxError",
      [new TypeError("x"), new RangeError("x"), new SyntaxError("x")],
      false,
    ],
    ["a plain Error with no status or code", [new Error("something")], false],
    ["{ retryable: false } (even with status 503)", [httpError(503, { retryable: false })], false],
    [
      "{ retryable: true } (even a TypeError)",
      [Object.assign(new TypeError("flaky"), { retryable: true })],
      true,
    ],
  ];
  for (const [what, errors, expected] of rows) {
    console.log(`${expected ? "retry" : "never"}  ${what}`);
    for (const error of errors) assert.equal(isTransient(error), expected, what);
  }
}

// 2. A non-retryable error propagates unchanged, the same object, at the attempt where it happens:
//    one call, no backoff timer, no RetryExhaustedError wrapper.
{
  const clock = createVirtualClock();
  const notFound = httpError(404);
  let calls = 0;
  const task = run(
    () =>
      retry(function* getOrder() {
        calls++;
        throw notFound;
      }),
    { clock },
  );
  await assert.rejects(Promise.resolve(task), (e) => e === notFound);
  assert.equal(calls, 1);
  assert.equal(clock.now(), 0);
  assert.equal(clock.pendingTimers, 0);
  console.log(`404: thrown as is after ${calls} call at ${clock.now()}`);
}

// 3. Layers must not multiply. An outer retry around an inner one does not retry the inner's
//    RetryExhaustedError (it says `retryable: false`): 3 calls, not 3 × 3.
{
  const clock = createVirtualClock();
  let calls = 0;
  const inner = () =>
    retry(
      function* callService() {
        calls++;
        throw httpError(503);
      },
      { attempts: 3, backoff: constant(10) },
    );
  const task = run(() => retry(inner, { attempts: 3, backoff: constant(10) }), { clock });
  await assert.rejects(Promise.resolve(task), (e) => e instanceof RetryExhaustedError && e.attempts === 3);
  assert.equal(calls, 3);
  console.log(`nested retries: ${calls} calls in all, the outer loop gave up on the inner's error at once`);
}

// 4. A cancellation is never retried, whatever `retryOn` says (it is never even asked). Cancelled
//    during attempt 2 at 150: the attempt's `finally` runs, no attempt 3, no backoff timer left.
{
  const clock = createVirtualClock();
  const events: KeelEvent[] = [];
  let calls = 0;
  let asked = 0;
  const task = run(
    () =>
      retry(
        function* flaky() {
          calls++;
          if (calls === 1) throw httpError(503);
          try {
            yield* suspend();
          } finally {
            console.log(`attempt ${calls} cleans up at ${clock.now()}`);
          }
        },
        {
          backoff: constant(50),
          retryOn: () => {
            asked++;
            return true;
          },
        },
      ),
    { clock, onEvent: (e) => events.push(e) },
  );
  clock.schedule(150, () => void task.cancel());
  await Promise.resolve(task).catch(() => {});
  assert.equal(task.state, "cancelled");
  assert.equal(calls, 2);
  assert.equal(asked, 1); // only for attempt 1's 503
  assert.equal(clock.pendingTimers, 0);
  const retryEvents = events.filter((e) => e.type.startsWith("retry:")).map((e) => `${e.type}@${e.at}`);
  assert.deepEqual(retryEvents, [
    "retry:start@0",
    "retry:attempt@0",
    "retry:sleep@0",
    "retry:attempt@50",
    "retry:end@150",
  ]);
  const end = events.find((e) => e.type === "retry:end");
  assert.ok(end?.type === "retry:end" && end.outcome === "cancelled");
  console.log(
    `cancelled during attempt 2: ${retryEvents.join(", ")} (no retry:giveup: retry:end says cancelled)`,
  );
}

// 5. A cancellation during the backoff sleep stops it there: attempt 2 never starts.
{
  const clock = createVirtualClock();
  let calls = 0;
  const task = run(
    () =>
      retry(
        function* flaky() {
          calls++;
          throw httpError(503);
        },
        { backoff: constant(50) },
      ),
    { clock },
  );
  clock.schedule(20, () => void task.cancel());
  // Joining a cancelled task throws TaskCancelledError, not a RetryExhaustedError.
  await assert.rejects(Promise.resolve(task), (e) => isTaskCancelledError(e) && !isRetryExhaustedError(e));
  assert.equal(task.state, "cancelled");
  assert.equal(calls, 1);
  assert.equal(clock.now(), 20);
  assert.equal(clock.pendingTimers, 0);
  console.log(`cancelled in the backoff sleep at ${clock.now()}: ${calls} call, no timer left`);
}
console.log("retry-transient: ok");
