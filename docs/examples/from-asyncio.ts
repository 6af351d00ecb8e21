/**
 * asyncio idioms, translated. Each block names the Python it replaces.
 */
import assert from "node:assert/strict";
import {
  all,
  isCancelled,
  isTimeoutError,
  now,
  type Op,
  type Operation,
  race,
  scoped,
  sleep,
  spawn,
  type Task,
  timeout,
  timeoutAt,
} from "@keel/core";
import { createHarness } from "@keel/testing";

function* fetchUser(id: number, ms: number): Operation<string> {
  yield* sleep(ms);
  return `user ${id}`;
}

// async with asyncio.timeout(1): ...           ->  yield* timeout(1000, op)
// await asyncio.wait_for(fetch_user(1), 1)      ->  the same: wait_for is a timeout around one call
{
  const h = createHarness();
  const v = await h.run(() => timeout(1000, fetchUser(1, 200)));
  assert.equal(v, "user 1");
  await assert.rejects(Promise.resolve(h.run(() => timeout(1000, fetchUser(2, 5000)))), isTimeoutError);
  await h.expectClean();
}

// async with asyncio.timeout_at(loop.time() + 2): ...   ->  timeoutAt((yield* now()) + 2000, op)
{
  const h = createHarness();
  const v = await h.run(function* handler() {
    const at = (yield* now()) + 2000;
    const a = yield* timeoutAt(at, fetchUser(1, 500));
    const b = yield* timeoutAt(at, fetchUser(2, 500)); // shares what is left of the 2 s
    return [a, b];
  });
  assert.deepEqual(v, ["user 1", "user 2"]);
  await h.expectClean();
}

// async with asyncio.TaskGroup() as tg: tg.create_task(...)   ->  scoped + spawn
// The first failure cancels the rest; Keel throws that error itself, not an ExceptionGroup.
{
  const h = createHarness();
  const names = await h.run(() =>
    scoped(function* group() {
      const a = yield* spawn(() => fetchUser(1, 100));
      const b = yield* spawn(() => fetchUser(2, 50));
      return [yield* a, yield* b];
    }),
  );
  assert.deepEqual(names, ["user 1", "user 2"]);
  await h.expectClean();
}

// await asyncio.gather(a(), b())   ->  all([a, b]), with one difference: when one fails, gather
// leaves the others running; all cancels them and waits for their cleanup before it throws.
{
  const h = createHarness();
  const task = h.run(() =>
    all([
      function* failing() {
        yield* sleep(10);
        throw new Error("a failed");
      },
      function* sibling() {
        try {
          yield* sleep(1000);
        } finally {
          h.mark("sibling cancelled, not left running");
        }
      },
    ]),
  );
  await assert.rejects(Promise.resolve(task), /a failed/);
  assert.deepEqual(h.log, ["sibling cancelled, not left running@10"]);
  await h.expectClean();
}

// asyncio.gather(..., return_exceptions=True)   ->  wrap each operation so errors become values.
// Let Cancelled through: it is a signal, not a result.
type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown };
function settled<T>(op: Op<T>): () => Operation<Settled<T>> {
  return function* settle() {
    try {
      const operation = typeof op === "function" ? op() : op;
      const value = yield* operation;
      return { ok: true, value };
    } catch (e) {
      if (isCancelled(e)) throw e;
      return { ok: false, error: e };
    }
  };
}
{
  const h = createHarness();
  const results = await h.run(() =>
    all([
      settled(() => fetchUser(1, 10)),
      settled(function* broken(): Operation<string> {
        throw new Error("no such user");
      }),
    ]),
  );
  assert.deepEqual(results[0], { ok: true, value: "user 1" });
  assert.equal(results[1].ok, false);
  await h.expectClean();
}

// asyncio.wait(tasks, return_when=FIRST_COMPLETED) + cancel the rest   ->  race
{
  const h = createHarness();
  assert.equal(await h.run(() => race([fetchUser(1, 300), fetchUser(2, 100)])), "user 2");
  await h.expectClean();
}

// task.uncancel() bookkeeping   ->  nothing to do: each timeout withdraws its own request, so an
// inner timeout that fired and was caught leaves the task uncancelled (cancelling() == 0).
{
  const h = createHarness();
  const task: Task<number> = h.run(function* handler() {
    try {
      yield* timeout(100, fetchUser(1, 5000));
    } catch (e) {
      if (!isTimeoutError(e)) throw e;
    }
    return task.cancellationCount;
  });
  assert.equal(await task, 0);
  await h.expectClean();
}

// except asyncio.CancelledError: ... raise   ->  catch (e) { if (isCancelled(e)) { ...; throw e } }
// A bare `catch` in JavaScript is `except BaseException`: it sees Cancelled too.
{
  const h = createHarness();
  const task = h.run(() =>
    timeout(50, function* worker() {
      try {
        yield* sleep(1000);
      } catch (e) {
        h.mark(isCancelled(e) ? `CancelledError equivalent: ${e.reason.kind}` : "an error");
        throw e;
      }
    }),
  );
  await assert.rejects(Promise.resolve(task), isTimeoutError);
  assert.deepEqual(h.log, ["CancelledError equivalent: timeout@50"]);
  await h.expectClean();
}
console.log("from-asyncio: ok");
