/**
 * Cancellation is a thrown `Cancelled` signal: cleanup at any depth of `yield*` runs to completion,
 * a `catch` can see the signal, and swallowing it never changes the task's outcome.
 */
import assert from "node:assert/strict";
import { isCancelled, isTaskCancelledError, type Operation, sleep, suspend } from "@keel/core";
import { createHarness } from "@keel/testing";

// 1. Nested frames unwind innermost first, each with async cleanup; code after a cancelled
//    `yield*` never runs (the shape that `iterator.return()` gets wrong).
{
  const h = createHarness();
  function* layer(name: string, body: () => Operation<void>): Operation<void> {
    try {
      yield* body();
      h.mark(`after ${name}`); // never logged: the signal keeps unwinding
    } finally {
      yield* sleep(5);
      h.mark(`${name} closed`);
    }
  }
  const task = h.run(() => layer("L1", () => layer("L2", () => layer("L3", suspend))));
  await h.run(function* operator() {
    yield* sleep(10);
    yield* task.cancel(); // settles once the task has finished unwinding
    h.mark(`cancel settled, task ${task.state}`);
  });
  assert.deepEqual(h.log, [
    "L3 closed@15",
    "L2 closed@20",
    "L1 closed@25",
    "cancel settled, task cancelled@25",
  ]);
  await h.expectClean();
}

// 2. A catch block sees Cancelled. It is not an Error, so error handling can tell it apart; the
//    rule is: handle your own errors, rethrow the signal.
{
  const h = createHarness();
  const task = h.run(function* worker() {
    try {
      yield* suspend();
    } catch (e) {
      if (isCancelled(e)) {
        h.mark(`signal: ${e.reason.kind} (${e.reason.message}), an Error? ${e instanceof Error}`);
        throw e; // rethrow: let the cancellation finish its work
      }
      h.mark("a real error would be handled here");
    }
  });
  await h.run(function* operator() {
    yield* sleep(10);
    yield* task.cancel("deploy");
  });
  assert.deepEqual(h.log, ["signal: cancel (deploy), an Error? false@10"]);
  assert.equal(task.state, "cancelled");
  await h.expectClean();
}

// 3. Swallowing the signal delays the task (within its cleanup budget) but changes nothing: the
//    task still ends cancelled, its value is dropped, the swallow is reported, and whoever joins
//    it gets TaskCancelledError, never Cancelled.
{
  const h = createHarness();
  const task = h.run(function* stubborn() {
    try {
      yield* suspend();
    } catch {
      h.mark("swallowed");
    }
    yield* sleep(1); // still works: the cleanup budget is not spent
    return 42;
  });
  const joiner = h.run(function* joiner() {
    try {
      return yield* task;
    } catch (e) {
      h.mark(`joiner got ${isTaskCancelledError(e) ? "TaskCancelledError" : String(e)}`);
      return -1;
    }
  });
  await h.run(function* operator() {
    yield* sleep(10);
    yield* task.cancel();
  });
  assert.equal(await joiner, -1);
  assert.equal(task.state, "cancelled");
  assert.deepEqual(h.log, ["swallowed@10", "joiner got TaskCancelledError@11"]);
  assert.equal(h.eventsOf("cleanup:swallow").length, 1);
  await h.expectClean();
}

// 4. Code between suspension points always runs to the next one: a task that cancels itself
//    keeps going until it next suspends.
{
  const h = createHarness();
  const task = h.run(function* selfCancelling() {
    try {
      yield* sleep(3);
      void task.cancel();
      h.mark("still running synchronously");
      yield* sleep(1); // the signal is thrown here
      h.mark("unreachable");
    } finally {
      h.mark("finally");
    }
  });
  await Promise.resolve(task).catch(() => {});
  assert.deepEqual(h.log, ["still running synchronously@3", "finally@3"]);
  assert.equal(task.state, "cancelled");
  await h.expectClean();
}
console.log("cancellation: ok");
