/**
 * Naming a timeout (`{ label }`), and testing for "ran out of time" whichever layer noticed it
 * (`isDeadlineExceeded`).
 */
import assert from "node:assert/strict";
import {
  constant,
  isDeadlineExceeded,
  isTimeoutError,
  retry,
  run,
  sleep,
  type TimeoutError,
  timeout,
} from "@keel/core";
import { HttpTimeoutError } from "@keel/core/http";
import { createVirtualClock } from "@keel/testing";

function* fetchOrders() {
  yield* sleep(1000);
  return ["order 1"];
}

// 1. The label names the work: in the message, the error's label and the timeout:fire event.
{
  const fired: string[] = [];
  try {
    await run(() => timeout(200, fetchOrders, { label: "fetch orders" }), {
      clock: createVirtualClock(),
      onEvent: (e) => e.type === "timeout:fire" && fired.push(e.scope.label),
    });
  } catch (e) {
    assert.ok(isTimeoutError(e));
    console.log(e.message);
    assert.equal(e.message, "timeout(200, fetch orders): timed out after 200 ms");
    assert.equal((e as TimeoutError).label, "timeout(200, fetch orders)");
  }
  assert.deepEqual(fired, ["timeout(200, fetch orders)"]);
}

// 2. Three ways to run out of time, one test. The retry gives up at 40 (its next pause would cross
//    the 85 ms deadline), before the timeout could fire; the HTTP error stands for a phase limit.
function* busy() {
  yield* sleep(40);
  throw Object.assign(new Error("busy"), { status: 503 });
}
const outcomes: unknown[] = [];
for (const op of [() => timeout(30, busy), () => timeout(85, retry(busy, { backoff: constant(50) }))]) {
  try {
    await run(op, { clock: createVirtualClock() });
  } catch (e) {
    outcomes.push(e);
  }
}
outcomes.push(
  new HttpTimeoutError({ phase: "headers", timeoutMs: 50, deadline: 50, elapsedMs: 50, label: "GET /" }),
);
for (const e of outcomes) console.log(`${(e as Error).name}: isDeadlineExceeded ${isDeadlineExceeded(e)}`);
assert.deepEqual(
  outcomes.map((e) => [(e as Error).name, isDeadlineExceeded(e)]),
  [
    ["TimeoutError", true],
    ["RetryExhaustedError", true],
    ["HttpTimeoutError", true],
  ],
);

// 3. Running out of attempts is not running out of time.
try {
  await run(() => retry(busy, { attempts: 2, backoff: constant(10) }), { clock: createVirtualClock() });
} catch (e) {
  console.log(`${(e as Error).message}: isDeadlineExceeded ${isDeadlineExceeded(e)}`);
  assert.equal(isDeadlineExceeded(e), false);
}
console.log("timeouts-label: ok");
