/**
 * A breaker inside each retry attempt: `retry(() => breaker.run(call))`. The breaker counts every
 * real request, and once it opens, BrokenCircuitError is not retried (it says `retryable: false`):
 * sustained failure stops the retries instead of multiplying them.
 */
import assert from "node:assert/strict";
import {
  all,
  createCircuitBreaker,
  exponential,
  isBrokenCircuitError,
  isRetryExhaustedError,
  type KeelEvent,
  retry,
  run,
  sleep,
} from "@keel/core";
import { createVirtualClock } from "@keel/testing";

const clock = createVirtualClock();
const events: KeelEvent[] = [];
const breaker = createCircuitBreaker({ failureThreshold: 5, halfOpenAfterMs: 1000, name: "orders" });

// The dependency: five 503s, then a 200 that takes 100 ms.
const requests: number[] = [];
const answers = [503, 503, 503, 503, 503, 200];
function* getOrders() {
  requests.push(clock.now());
  if (answers.shift() === 200) {
    yield* sleep(100);
    return "orders";
  }
  throw Object.assign(new Error("HTTP 503"), { status: 503 });
}

// Each call: up to 3 attempts, backoff 50, 100 (random pinned to 0.5), the breaker inside each attempt.
const call = () =>
  retry(() => breaker.run(getOrders), { attempts: 3, backoff: exponential({ baseMs: 100, maxMs: 1000 }) });

const log: string[] = [];
const outcome = (n: number, e: unknown) => {
  if (isRetryExhaustedError(e)) log.push(`call ${n}: RetryExhaustedError (${e.reason})@${clock.now()}`);
  else if (isBrokenCircuitError(e)) log.push(`call ${n}: BrokenCircuitError@${clock.now()}`);
  else throw e;
};

await run(
  function* client() {
    // Call 1: three requests (0, 50, 150), all 503: the retry loop runs out of attempts.
    try {
      yield* call();
    } catch (e) {
      outcome(1, e);
    }
    // Call 2: requests at 150 and 200; the fifth failure opens the breaker at 200, so attempt 3 (at
    // 300) is refused without a request, and the refusal is thrown as is, not retried.
    try {
      yield* call();
    } catch (e) {
      outcome(2, e);
    }
    log.push(`state ${breaker.state}`);
    // Calls 3 to 6: refused at once, no request, no backoff.
    for (let n = 3; n <= 6; n++) {
      try {
        yield* call();
      } catch (e) {
        outcome(n, e);
      }
    }
    // At 1200 the breaker is half-open: call 7 is the probe; call 8, 50 ms later, is refused.
    yield* sleep(1200 - clock.now());
    log.push(`state ${breaker.state}@${clock.now()}`);
    yield* all([
      function* call7() {
        log.push(`call 7: ${yield* call()}@${clock.now()}`);
      },
      function* call8() {
        yield* sleep(50);
        try {
          yield* call();
        } catch (e) {
          outcome(8, e);
        }
      },
    ]);
    log.push(`state ${breaker.state}`);
  },
  { clock, random: () => 0.5, onEvent: (e) => events.push(e) },
);

console.log(log.join("\n"));
console.log(`requests at ${requests.join(", ")}`);
assert.deepEqual(log, [
  "call 1: RetryExhaustedError (attempts)@150",
  "call 2: BrokenCircuitError@300",
  "state open",
  "call 3: BrokenCircuitError@300",
  "call 4: BrokenCircuitError@300",
  "call 5: BrokenCircuitError@300",
  "call 6: BrokenCircuitError@300",
  "state half-open@1200",
  "call 8: BrokenCircuitError@1250",
  "call 7: orders@1300",
  "state closed",
]);
assert.deepEqual(requests, [0, 50, 150, 150, 200, 1200]);
// The retry loops saw BrokenCircuitError as not retryable: they gave up on it at once.
const refusals = events.filter((e) => e.type === "retry:giveup" && e.reason === "not-retryable");
assert.equal(refusals.length, 6);
assert.equal(clock.pendingTimers, 0); // the breaker arms no timer: its state is computed from the clock
console.log("limits-breaker-and-retry: ok");
