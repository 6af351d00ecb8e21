/**
 * A token bucket: `perSecond` tokens a second, up to `burst` saved. A new limiter starts full, so it
 * allows a burst at once; after that, callers are served in order, one token each, at the refill
 * rate. A waiter that is cancelled consumes no token.
 */
import assert from "node:assert/strict";
import { all, createRateLimiter, run, sleep, spawn } from "@keel/core";
import { createVirtualClock } from "@keel/testing";

// 1. 10 a second with a burst of 3: eight callers at once. Three pass at 0 (the full bucket), then
//    one every 100 ms.
{
  const clock = createVirtualClock();
  const api = createRateLimiter({ perSecond: 10, burst: 3, name: "api" });
  const passed: number[] = [];
  await run(
    () =>
      all(
        Array.from(
          { length: 8 },
          () =>
            function* caller() {
              yield* api.take();
              passed.push(clock.now());
            },
        ),
      ),
    { clock },
  );
  console.log(`8 callers at once pass at ${passed.join(", ")}`);
  assert.deepEqual(passed, [0, 0, 0, 100, 200, 300, 400, 500]);

  // 2. An idle limiter saves tokens, but never more than `burst`: after 5 s of silence, again three
  //    at once and then the steady rate. The limiter arms no timer while nobody waits.
  const later: number[] = [];
  await run(
    function* afterAPause() {
      yield* sleep(5000);
      for (let i = 0; i < 5; i++) {
        yield* api.take();
        later.push(clock.now());
      }
    },
    { clock },
  );
  console.log(`after 5 s idle: ${later.join(", ")}`);
  assert.deepEqual(later, [5500, 5500, 5500, 5600, 5700]);
  assert.equal(clock.pendingTimers, 0);
}

// 3. The default burst is 1: a strict pace from the first call.
{
  const clock = createVirtualClock();
  const limiter = createRateLimiter({ perSecond: 4 });
  const passed: number[] = [];
  await run(
    function* paced() {
      for (let i = 0; i < 4; i++) {
        yield* limiter.take();
        passed.push(clock.now());
      }
    },
    { clock },
  );
  console.log(`4 a second, burst 1: ${passed.join(", ")}`);
  assert.deepEqual(passed, [0, 250, 500, 750]);
}

// 4. Five callers at 0 with a burst of 3: the fourth passes at 100; the fifth is cancelled at 50 while
//    it waits, takes no token, so a sixth caller at 150 passes at 200, not at 300.
{
  const clock = createVirtualClock();
  const limiter = createRateLimiter({ perSecond: 10, burst: 3 });
  const log: string[] = [];
  await run(
    function* main() {
      const callers = [];
      for (let n = 1; n <= 5; n++) {
        callers.push(
          yield* spawn(function* caller() {
            yield* limiter.take();
            log.push(`${n}@${clock.now()}`);
          }),
        );
      }
      yield* sleep(50);
      log.push(`waiting at 50: ${limiter.waiting}`);
      yield* callers[4]!.cancel();
      yield* sleep(100);
      yield* limiter.take();
      log.push(`6@${clock.now()}`);
      for (const c of callers.slice(0, 4)) yield* c;
    },
    { clock },
  );
  console.log(log.join(", "));
  assert.deepEqual(log, ["1@0", "2@0", "3@0", "waiting at 50: 2", "4@100", "6@200"]);
  assert.equal(clock.pendingTimers, 0);
}
console.log("limits-rate-limiter: ok");
