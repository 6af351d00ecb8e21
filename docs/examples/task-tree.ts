/**
 * The task tree: children belong to the scope that spawned them, a scope waits for its children,
 * and a child's error fails its owner. Runs on a virtual clock, so every time printed is exact.
 */
import assert from "node:assert/strict";
import { isTaskCancelledError, scoped, sleep, spawn, suspend } from "@keel/core";
import { createHarness } from "@keel/testing";

// 1. spawn returns the task before its body runs; joining gives the value.
{
  const h = createHarness();
  const sum = await h.run(function* parent() {
    const a = yield* spawn(function* fetchA() {
      h.mark("fetchA starts");
      yield* sleep(10);
      return 1;
    });
    h.mark(`spawned ${a.name}#${a.id}, state ${a.state}`);
    const b = yield* spawn(function* fetchB() {
      yield* sleep(20);
      return 2;
    });
    return (yield* a) + (yield* b);
  });
  assert.equal(sum, 3);
  assert.match(h.log[0]!, /^spawned fetchA#\d+, state running@0$/);
  assert.equal(h.log[1], "fetchA starts@0");
  await h.expectClean();
}

// 2. A scope never finishes before its children: when its body returns, children still running
//    are cancelled (reason "parent") and awaited, cleanup included.
{
  const h = createHarness();
  const value = await h.run(() =>
    scoped(function* batch() {
      yield* spawn(function* heartbeat() {
        try {
          for (;;) yield* sleep(100);
        } finally {
          h.mark("heartbeat cleanup starts");
          yield* sleep(5); // async cleanup is allowed
          h.mark("heartbeat cleanup ends");
        }
      });
      yield* sleep(250);
      return "batch done";
    }),
  );
  assert.equal(value, "batch done");
  assert.deepEqual(h.log, ["heartbeat cleanup starts@250", "heartbeat cleanup ends@255"]);
  assert.equal(h.clock.now(), 255); // scoped returned only after the child had finished
  await h.expectClean();
}

// 3. A child's error fails its owner: siblings are cancelled, then the same error object is thrown.
{
  const h = createHarness();
  const boom = new Error("boom");
  const failing = h.run(() =>
    scoped(function* group() {
      yield* spawn(function* willFail() {
        yield* sleep(30);
        throw boom;
      });
      yield* spawn(function* sibling() {
        try {
          yield* suspend();
        } finally {
          h.mark("sibling cancelled");
        }
      });
      yield* suspend();
    }),
  );
  await assert.rejects(Promise.resolve(failing), (e) => e === boom);
  assert.equal(failing.state, "failed");
  assert.deepEqual(h.log, ["sibling cancelled@30"]);
  await h.expectClean();
}

// 4. Joining a cancelled task throws TaskCancelledError (an ordinary Error), never Cancelled.
{
  const h = createHarness();
  const worker = h.run(function* worker() {
    yield* suspend();
  });
  await worker.cancel("not needed");
  assert.equal(worker.state, "cancelled");
  await assert.rejects(
    Promise.resolve(worker),
    (e) => isTaskCancelledError(e) && e.reason.message === "not needed",
  );

  await h.expectClean();
}
console.log("task-tree: ok");
