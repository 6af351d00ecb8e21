/**
 * Groups: `scoped`, `all` and `race`. Every child belongs to the group, the first error cancels
 * the rest and is thrown unchanged once they have unwound, later errors ride along in `suppressed`.
 */
import assert from "node:assert/strict";
import { all, race, scoped, sleep, spawn, suspend } from "@keel/core";
import { createHarness } from "@keel/testing";

const suppressedOf = (e: unknown) => (e as { suppressed?: unknown[] }).suppressed ?? [];

// 1. all: values in input order, whatever order they finish in.
{
  const h = createHarness();
  const values = await h.run(() =>
    all([
      function* slow() {
        yield* sleep(300);
        return "a";
      },
      function* fast() {
        yield* sleep(100);
        return 2;
      },
    ]),
  );
  assert.deepEqual(values, ["a", 2]);
  assert.deepEqual(await h.run(() => all([])), []);
  await h.expectClean();
}

// 2. all: the first error cancels the siblings, waits for their cleanup, then is thrown as is.
//    A sibling whose cleanup fails too adds its error to the first one's `suppressed`.
{
  const h = createHarness();
  const first = new Error("payment declined");
  const later = new Error("could not release the reservation");
  const task = h.run(() =>
    all([
      function* charge() {
        yield* sleep(100);
        throw first;
      },
      function* reserve() {
        try {
          yield* sleep(500);
        } finally {
          yield* sleep(20);
          h.mark("reserve cleaned up");
          // biome-ignore lint/correctness/noUnsafeFinally: a cleanup that fails
          throw later;
        }
      },
    ]),
  );
  await assert.rejects(Promise.resolve(task), (e) => e === first);
  assert.deepEqual(suppressedOf(first), [later]);
  assert.deepEqual(h.log, ["reserve cleaned up@120"]);
  assert.equal(h.clock.now(), 120);
  assert.equal(h.eventsOf("error:suppressed").length, 1);
  await h.expectClean();
}

// 3. race: the first to settle wins, value or error; the losers are cancelled and their cleanup
//    finishes before race returns.
{
  const h = createHarness();
  const winner = await h.run(() =>
    race([
      function* primary() {
        try {
          yield* sleep(200);
          return "primary";
        } finally {
          yield* sleep(30);
          h.mark("primary cleaned up");
        }
      },
      function* hedge() {
        yield* sleep(100);
        return "hedge";
      },
    ]),
  );
  assert.equal(winner, "hedge");
  assert.deepEqual(h.log, ["primary cleaned up@130"]);
  assert.equal(h.clock.now(), 130);
  assert.throws(() => race([]), RangeError); // nothing could ever win
  await h.expectClean();
}

// 4. scoped: spawn freely inside; the body's error or a child's error cancels everything in it.
{
  const h = createHarness();
  const crash = new Error("worker crashed");
  const task = h.run(() =>
    scoped(function* pool() {
      for (const name of ["w1", "w2"]) {
        yield* spawn(function* worker() {
          try {
            yield* suspend();
          } finally {
            h.mark(`${name} stopped`);
          }
        });
      }
      yield* spawn(function* w3() {
        yield* sleep(50);
        throw crash;
      });
      yield* suspend();
    }),
  );
  await assert.rejects(Promise.resolve(task), (e) => e === crash && suppressedOf(e).length === 0);
  assert.deepEqual(h.log.sort(), ["w1 stopped@50", "w2 stopped@50"]);
  await h.expectClean();
}

// 5. Unlike Promise.all (or asyncio.gather), nothing keeps running after all() throws.
{
  const h = createHarness();
  const task = h.run(() =>
    all([
      function* fails() {
        yield* sleep(100);
        throw new Error("e");
      },
      function* writer() {
        yield* sleep(500);
        h.mark("write"); // never happens
      },
    ]),
  );
  await assert.rejects(Promise.resolve(task));
  h.clock.advance(1000);
  assert.deepEqual(h.log, []);
  await h.expectClean();
}
console.log("groups: ok");
