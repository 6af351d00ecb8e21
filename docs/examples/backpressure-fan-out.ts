/**
 * Bounded fan-out: `mapLimit(items, limit, fn)` runs at most `limit` items at once and returns the
 * results in input order; `forEachLimit` is the same for effects. A failure has `all()`'s meaning:
 * the items running are cancelled and awaited, the error is thrown, and items not started never start.
 */
import assert from "node:assert/strict";
import { forEachLimit, isCancelled, mapLimit, run, sleep } from "@keel/core";
import { createVirtualClock } from "@keel/testing";

// 1. Ten pages, three at a time, page n takes 10·n ms. The results come back in input order, never
//    more than three run at once, and a free worker takes the next page as soon as it is done.
{
  const clock = createVirtualClock();
  let running = 0;
  let peak = 0;
  const startedAt: number[] = [];
  const sizes = await run(
    () =>
      mapLimit([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 3, function* fetchPage(page) {
        running++;
        peak = Math.max(peak, running);
        startedAt.push(clock.now());
        try {
          yield* sleep(page * 10);
          return page * 100;
        } finally {
          running--;
        }
      }),
    { clock },
  );
  console.log(`results ${sizes.join(", ")}`);
  console.log(`starts ${startedAt.join(", ")}; at most ${peak} at once; done at ${clock.now()}`);
  assert.deepEqual(sizes, [100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]);
  assert.equal(peak, 3);
  assert.deepEqual(startedAt, [0, 0, 0, 10, 20, 30, 50, 70, 90, 120]);
}

// 2. Item 4 fails at 150. Items 5 and 6, running, are cancelled and need 20 ms each to clean up, so
//    mapLimit throws item 4's error at 170, not before; items 7 to 10 never start.
{
  const clock = createVirtualClock();
  const started: number[] = [];
  const cleaned: string[] = [];
  const e4 = new Error("item 4 failed");
  const task = run(
    () =>
      mapLimit([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 3, function* processItem(n) {
        started.push(n);
        try {
          yield* sleep(n === 4 ? 50 : 100);
          if (n === 4) throw e4;
          return n;
        } catch (e) {
          if (isCancelled(e)) {
            yield* sleep(20);
            cleaned.push(`item ${n}@${clock.now()}`);
          }
          throw e;
        }
      }),
    { clock },
  );
  await assert.rejects(Promise.resolve(task), (e) => e === e4);
  console.log(
    `failed at ${clock.now()} after cleaning up ${cleaned.join(", ")}; started ${started.join(", ")}`,
  );
  assert.equal(clock.now(), 170);
  assert.deepEqual(cleaned, ["item 5@170", "item 6@170"]);
  assert.deepEqual(started, [1, 2, 3, 4, 5, 6]);
  assert.equal(clock.pendingTimers, 0);
}

// 3. forEachLimit: effects only, two at a time.
{
  const clock = createVirtualClock();
  const sent: string[] = [];
  await run(
    () =>
      forEachLimit(["ann", "bob", "cy", "dee"], 2, function* sendMail(to) {
        yield* sleep(10);
        sent.push(`${to}@${clock.now()}`);
      }),
    { clock },
  );
  console.log(`sent ${sent.join(", ")}`);
  assert.deepEqual(sent, ["ann@10", "bob@10", "cy@20", "dee@20"]);
}
console.log("backpressure-fan-out: ok");
