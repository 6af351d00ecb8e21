/**
 * Lazy sources: `mapLimit` / `forEachLimit` pull the next item only when a worker is free, so an
 * endless generator or an async iterable (a paginated API, a stream) is read with bounded memory;
 * `feed` pipes one into a channel at the consumer's pace; `trySend` feeds a channel from callbacks.
 */
import assert from "node:assert/strict";
import {
  createChannel,
  feed,
  forEachLimit,
  isTimeoutError,
  mapLimit,
  run,
  sleep,
  spawn,
  timeout,
} from "@keel/core";
import { createVirtualClock } from "@keel/testing";

// 1. An endless job source under a timeout: four workers take a job each time one frees up, and the
//    timeout ends the fan-out at 100; the generator is closed (its finally runs) on the way out.
{
  const clock = createVirtualClock();
  let pulled = 0;
  let closed = false;
  function* jobs() {
    try {
      for (let id = 1; ; id++) {
        pulled++;
        yield `job ${id}`;
      }
    } finally {
      closed = true;
    }
  }
  let handled = 0;
  try {
    await run(
      () =>
        timeout(
          100,
          forEachLimit(jobs(), 4, function* handle() {
            yield* sleep(10);
            handled++;
          }),
          { label: "drain jobs" },
        ),
      { clock },
    );
  } catch (e) {
    assert.ok(isTimeoutError(e));
    console.log(`${e.message}: ${handled} handled, ${pulled} pulled, source closed: ${closed}`);
  }
  assert.equal(handled, 36); // 4 workers × 9 finished before 100; the 10th round was cut
  assert.equal(pulled, 40); // never more than 4 ahead of the finished ones
  assert.ok(closed);
}

// 2. A paginated API as an async generator: each page is fetched only when a worker needs the next
//    order, and the results come back in input order.
{
  const clock = createVirtualClock();
  const fetched: string[] = [];
  async function* orders() {
    for (let page = 1; page <= 3; page++) {
      fetched.push(`page ${page}`);
      const ids = await Promise.resolve([page * 10 + 1, page * 10 + 2]); // a fetch, say
      yield* ids;
    }
  }
  const totals = await run(
    () =>
      mapLimit(orders(), 2, function* total(id) {
        yield* sleep(id % 3);
        return `order ${id}`;
      }),
    { clock },
  );
  console.log(`${totals.join(", ")} (${fetched.length} pages)`);
  assert.deepEqual(totals, ["order 11", "order 12", "order 21", "order 22", "order 31", "order 32"]);
}

// 3. feed: a stream into a channel of capacity 2, read by a slow consumer. The feed pulls a line only
//    when the channel has room, and closes the channel at the end, which ends the consumer's loop.
{
  const clock = createVirtualClock();
  let read = 0;
  async function* lines() {
    for (const line of ["a", "b", "c", "d", "e", "f"]) {
      read++;
      yield line;
    }
  }
  const ch = createChannel<string>({ capacity: 2, name: "lines" });
  const seen = await run(
    function* () {
      yield* spawn(() => feed(ch, lines()));
      const out: string[] = [];
      for (let r = yield* ch.next(); !r.done; r = yield* ch.next()) {
        yield* sleep(10);
        out.push(`${r.value}@${clock.now()} (${read} read)`);
      }
      return out;
    },
    { clock },
  );
  console.log(seen.join(", "));
  // While "a" is handled, the feed has read "b" and "c" (the channel's 2) and holds "d" until there
  // is room: one line more each time the consumer takes one, never the whole stream.
  assert.deepEqual(seen, [
    "a@10 (4 read)",
    "b@20 (5 read)",
    "c@30 (6 read)",
    "d@40 (6 read)",
    "e@50 (6 read)",
    "f@60 (6 read)",
  ]);
}

// 4. trySend from callback code: an event source that cannot wait. A full channel says false, and
//    the callback decides (here: count the drop; a stream would pause).
{
  const clock = createVirtualClock();
  const ch = createChannel<number>({ capacity: 2, name: "ticks" });
  let dropped = 0;
  for (let t = 1; t <= 5; t++) clock.schedule(t, () => ch.trySend(t) || dropped++);
  clock.schedule(6, () => ch.close());
  const got = await run(
    function* () {
      yield* sleep(3); // a slow start: ticks 3 and 4 arrive while two are buffered
      const out: number[] = [];
      for (let r = yield* ch.next(); !r.done; r = yield* ch.next()) out.push(r.value);
      return out;
    },
    { clock },
  );
  console.log(`received ${got.join(", ")}; dropped ${dropped}`);
  assert.deepEqual(got, [1, 2, 4, 5]);
  assert.equal(dropped, 1);
}
console.log("backpressure-lazy: ok");
