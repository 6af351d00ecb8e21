/**
 * Keel and effection 4 in one program: `fromEffection` (effection from Keel) and `toEffection`
 * (Keel from effection), values, errors and cancellation in both directions, the halt hazard, and
 * nesting. effection's timers are real, so this runs on the real clock with short durations.
 */
import assert from "node:assert/strict";
import {
  deadline,
  isCancelled,
  isTaskCancelledError,
  isTimeoutError,
  retry,
  run,
  sleep,
  suspend,
  TimeoutError,
  timeout,
} from "@keel/core";
import { fromEffection, toEffection } from "@keel/core/effection";
import * as effection from "effection";

// An existing effection resource, unchanged: a "connection" that must be closed exactly once.
let opened = 0;
let closed = 0;
function useConnection(): effection.Operation<{ query(sql: string): effection.Operation<string> }> {
  return effection.resource(function* connection(provide) {
    opened++;
    try {
      yield* provide({
        *query(sql: string) {
          yield* effection.sleep(2);
          return `rows for ${sql}`;
        },
      });
    } finally {
      yield* effection.sleep(2); // async close
      closed++;
    }
  });
}

// 1. fromEffection: Keel code runs effection code; the value comes back, the resource is closed
//    when the effection operation ends.
{
  const rows = await run(function* report() {
    // Pass the generator function, not a generator object: each run starts a fresh one.
    return yield* fromEffection(
      function* queryOnce() {
        const db = yield* useConnection();
        return yield* db.query("select 1");
      },
      { name: "query" },
    );
  });
  assert.equal(rows, "rows for select 1");
  assert.deepEqual([opened, closed], [1, 1]);
}

// 2. A Keel timeout around effection code halts it (effection's return(): no catch runs, only
//    finally), waits for its teardown, and throws TimeoutError.
{
  const seen: string[] = [];
  const task = run(() =>
    timeout(
      20,
      fromEffection(
        function* slow() {
          const db = yield* useConnection();
          try {
            yield* effection.sleep(10_000);
            return yield* db.query("too late");
          } catch {
            seen.push("catch (never runs on a halt)");
          } finally {
            seen.push("effection finally");
          }
        },
        { name: "slow" },
      ),
    ),
  );
  await assert.rejects(Promise.resolve(task), (e) => e instanceof TimeoutError);
  assert.deepEqual(seen, ["effection finally"]);
  assert.deepEqual([opened, closed], [2, 2]); // closed before the TimeoutError reached us
}

// 3. toEffection: effection code runs Keel code. Errors cross unchanged; a Keel TimeoutError stays
//    a TimeoutError.
{
  const value = await effection.run(() =>
    toEffection(function* keelWork() {
      yield* sleep(2);
      return "from keel";
    }),
  );
  assert.equal(value, "from keel");
  const e = await effection
    .run(() => toEffection(() => timeout(5, sleep(10_000))))
    .then(
      () => null,
      (error: unknown) => error,
    );
  assert.ok(isTimeoutError(e));
}

// 4. Halting effection cancels Keel: Cancelled is thrown inside Keel, its finally runs async
//    cleanup, and the halt waits for it.
{
  const seen: string[] = [];
  const task = effection.run(() =>
    toEffection(function* server() {
      try {
        yield* suspend();
      } catch (e) {
        seen.push(isCancelled(e) ? `Cancelled: ${e.message}` : "other");
        throw e; // always rethrow the signal
      } finally {
        yield* sleep(5); // async cleanup works: the throw survives this yield
        seen.push("keel cleanup done");
      }
    }),
  );
  await new Promise((resolve) => setTimeout(resolve, 2));
  await task.halt();
  assert.deepEqual(seen, ["Cancelled: cancel: halted by effection", "keel cleanup done"]);
}

// 5. The hazard (effection #1190, #1154): in plain effection, a finally that yields inside a
//    delegated frame loses the halt, and the caller runs on. The same shape in Keel does not.
{
  const plain: string[] = [];
  function* innerE(): effection.Operation<void> {
    try {
      yield* effection.suspend();
    } finally {
      yield* effection.sleep(2);
    }
  }
  const a = effection.run(function* outerE() {
    yield* innerE();
    plain.push("ran on after the halt");
  });
  const keel: string[] = [];
  function* innerK() {
    try {
      yield* suspend();
    } finally {
      yield* sleep(2);
    }
  }
  const b = effection.run(() =>
    toEffection(function* outerK() {
      yield* innerK();
      keel.push("ran on after the halt");
    }),
  );
  await new Promise((resolve) => setTimeout(resolve, 2));
  await a.halt();
  await b.halt();
  assert.deepEqual(plain, ["ran on after the halt"]);
  assert.deepEqual(keel, []);
}

// 6. Nesting: Keel inside effection inside Keel runs on the outer clock, under the outer deadline,
//    and an outer Keel timeout still bounds it.
{
  const inner = await run(() =>
    timeout(5000, function* outer() {
      const outerDeadline = yield* deadline();
      const innerDeadline = yield* fromEffection(toEffection(deadline), { name: "bridge" });
      return innerDeadline === outerDeadline;
    }),
  );
  assert.equal(inner, true);
  const bounded = run(() => timeout(10, fromEffection(toEffection(sleep(10_000)), { name: "bridge" })));
  await assert.rejects(Promise.resolve(bounded), isTimeoutError);
}

// 7. Cancelling the Keel side from promise code: the effection resource is closed exactly once.
{
  const task = run(function* holdConnection() {
    yield* fromEffection(
      function* idle() {
        yield* useConnection();
        yield* effection.suspend();
      },
      { name: "idle" },
    );
  });
  await new Promise((resolve) => setTimeout(resolve, 2));
  await task.cancel("shutdown");
  await assert.rejects(Promise.resolve(task), isTaskCancelledError);
  assert.deepEqual([opened, closed], [3, 3]);
}

// 8. An operation that runs more than once (a retry, say) takes the generator function: each attempt
//    starts a fresh generator. A generator object runs only once; its second run throws a TypeError
//    instead of "succeeding" with undefined.
{
  let calls = 0;
  function* flaky() {
    yield* effection.sleep(1);
    if (++calls === 1) throw new Error("first call fails");
    return "second call works";
  }
  const value = await run(() => retry(fromEffection(flaky), { attempts: 2, retryOn: () => true }));
  assert.equal(value, "second call works");
  const once = fromEffection(flaky());
  const twice = run(function* () {
    yield* once;
    yield* once;
  });
  await assert.rejects(Promise.resolve(twice), /generator object has already run/);
}

console.log("effection-interop: ok");
