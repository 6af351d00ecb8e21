/**
 * Deadlines travel: the effective deadline is the earliest over every enclosing scope, children
 * inherit it, and `remaining()` hands what is left to the next hop.
 */
import assert from "node:assert/strict";
import {
  call,
  deadline,
  isTimeoutError,
  now,
  remaining,
  sleep,
  spawn,
  suspend,
  timeout,
  timeoutAt,
} from "@keel/core";
import { createHarness } from "@keel/testing";

// 1. The earliest deadline wins, whatever the nesting order; outside every scope there is none.
{
  const h = createHarness();
  const reads = await h.run(function* reads() {
    const outside = [yield* deadline(), yield* remaining()];
    const inside = yield* timeout(5000, () =>
      timeout(10_000, function* read() {
        yield* sleep(1200);
        return [yield* deadline(), yield* remaining()];
      }),
    );
    return { outside, inside };
  });
  assert.deepEqual(reads, { outside: [Infinity, Infinity], inside: [5000, 3800] });
  await h.expectClean();
}

// 2. Across hops: children inherit the deadline in force where they were spawned, so every hop
//    sees only what is left, and the whole chain ends at the one deadline.
{
  const h = createHarness();
  const task = h.run(() =>
    timeoutAt(5000, function* handler() {
      yield* sleep(3000); // hop 1
      const hop2 = yield* spawn(function* hop2() {
        h.mark(`hop2 has ${yield* remaining()} ms`);
        yield* sleep(1000);
        const hop3 = yield* spawn(function* hop3() {
          h.mark(`hop3 has ${yield* remaining()} ms`);
          yield* suspend();
        });
        yield* hop3;
      });
      yield* hop2;
    }),
  );
  await assert.rejects(Promise.resolve(task), (e) => isTimeoutError(e) && e.deadline === 5000);
  assert.deepEqual(h.log, ["hop2 has 2000 ms@3000", "hop3 has 1000 ms@4000"]);
  await h.expectClean();
}

// 3. A melting budget: timeoutAt shares one deadline across sequential steps. With timeout(2000)
//    around each step the total could reach 6000 ms; here it cannot pass 2000.
{
  const h = createHarness();
  const task = h.run(function* checkout() {
    const at = (yield* now()) + 2000;
    for (const step of ["reserve", "charge", "confirm"]) {
      yield* timeoutAt(at, function* run() {
        h.mark(`${step}: ${yield* remaining()} ms left`);
        yield* sleep(800);
      });
    }
  });
  await assert.rejects(Promise.resolve(task), (e) => isTimeoutError(e) && e.deadline === 2000);
  assert.deepEqual(h.log, [
    "reserve: 2000 ms left@0",
    "charge: 1200 ms left@800",
    "confirm: 400 ms left@1600",
  ]);
  assert.equal(h.clock.now(), 2000);
  await h.expectClean();
}

// 4. remaining() downstream: tell the next service how long the caller will wait, so it can give
//    up too instead of finishing work nobody reads.
{
  const h = createHarness();
  const sent: string[] = [];
  const fakeFetch = (url: string, init: { headers: Record<string, string>; signal: AbortSignal }) => {
    sent.push(`${url} budget=${init.headers["x-budget-ms"]} aborted=${init.signal.aborted}`);
    return Promise.resolve({ ok: true });
  };
  await h.run(() =>
    timeout(3000, function* handler() {
      yield* sleep(250);
      const budget = yield* remaining();
      return yield* call((signal) =>
        fakeFetch("/inventory", { headers: { "x-budget-ms": String(budget) }, signal }),
      );
    }),
  );
  assert.deepEqual(sent, ["/inventory budget=2750 aborted=false"]);
  await h.expectClean();
}
console.log("deadlines: ok");
